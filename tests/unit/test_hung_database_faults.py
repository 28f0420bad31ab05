"""How timeouts read as faults: the client giving up (a hung database) is an outage; the
server ending a statement at its statement or lock timeout is UNAVAILABLE for that call but
no outage; a failure of a call begun before the database answered again is stale."""

from __future__ import annotations

import time

from episodic.store.faults import Fault, StoreHealth, answered_in_time, classify, no_answer


class PgError(Exception):
    def __init__(self, sqlstate: str) -> None:
        super().__init__("boom")
        self.sqlstate = sqlstate


def raised_from(cause: BaseException) -> Exception:
    try:
        raise RuntimeError("wrapped") from cause
    except RuntimeError as exc:
        return exc


def test_a_client_side_timeout_is_a_hung_database() -> None:
    exc = raised_from(TimeoutError())
    assert classify(exc) is Fault.UNAVAILABLE and no_answer(exc) and not answered_in_time(exc)


def test_statement_and_lock_timeouts_are_answers() -> None:
    for sqlstate in ("57014", "55P03"):
        exc = raised_from(PgError(sqlstate))
        assert classify(exc) is Fault.UNAVAILABLE and answered_in_time(exc) and not no_answer(exc)
    assert not answered_in_time(PgError("08006"))


def test_a_failure_begun_before_recovery_does_not_flip_health_again() -> None:
    health = StoreHealth()
    heard: list[bool] = []
    health.listen(heard.append)
    began = time.monotonic()
    health.fault = Fault.UNAVAILABLE  # down, as after a failed call
    health.succeeded(wrote=False)
    health.failed(Fault.UNAVAILABLE, TimeoutError(), started=began)
    assert health.healthy and heard == [True]
    health.failed(Fault.UNAVAILABLE, TimeoutError(), started=time.monotonic())
    assert not health.healthy and heard == [True, False]
