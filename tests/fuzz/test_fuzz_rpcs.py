"""The fast slice of the fuzzing: every RPC of the episodic.v1 services (discovered from the
descriptors) gets EPISODIC_FUZZ_EXAMPLES generated hostile or plausible requests (20 by
default) against a live in-process server on SQLite. No request may end INTERNAL or
UNKNOWN, the server keeps answering health checks, and no rejected write leaves anything
behind. `pytest -s` prints the per-RPC table; the long run is scripts/fuzz.sh."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from tests.fuzz.runner import Plan, Report, discover_rpcs, fuzz
from tests.server_harness import running_server, settings_for

EXAMPLES = int(os.environ.get("EPISODIC_FUZZ_EXAMPLES", "20"))
SEED = int(os.environ.get("EPISODIC_FUZZ_SEED", "0"))


async def _fuzz_in_process(database_url: str) -> Report:
    async with running_server(settings_for(database_url, migrate_on_start=True)) as server:
        return await fuzz(server.address, Plan(examples=EXAMPLES, batch=50, seed=SEED, workers=1))


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Report:
    """One fuzzing run shared by the tests below, on a fresh SQLite database."""
    database: Path = tmp_path_factory.mktemp("fuzz") / "episodic.db"
    result = asyncio.run(_fuzz_in_process(f"sqlite:///{database}"))
    print(f"\n{EXAMPLES} requests per RPC, seed {SEED}\n{result.table()}")
    return result


def _explained(report: Report) -> str:
    return f"\n{report.table()}\n\n{report.problems()}"


def test_every_discovered_rpc_is_fuzzed_with_the_configured_number_of_requests(report: Report) -> None:
    sent = {rpc.name: report.sent(rpc) for rpc in discover_rpcs()}
    assert sent == dict.fromkeys(sent, EXAMPLES), _explained(report)


def test_no_request_ends_in_internal_or_unknown_or_an_undecodable_response(report: Report) -> None:
    assert not report.failures, _explained(report)


def test_the_server_answers_health_checks_throughout_and_afterwards(report: Report) -> None:
    assert not report.health_problems, _explained(report)


def test_no_rejected_write_leaves_messages_and_every_log_stays_gapless(report: Report) -> None:
    assert not report.invariant_violations, _explained(report)


def test_plausible_requests_get_past_validation_into_the_services(report: Report) -> None:
    """Guards the fuzzer itself: requests that all bounce off validation test little."""
    assert report.ok_by_kind["plausible"] >= report.sent_by_kind["plausible"] // 5, _explained(report)
