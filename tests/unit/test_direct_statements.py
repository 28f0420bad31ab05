"""Statements run direct on SQLite's sqlite3 connection (store/direct.py) store and read
exactly what SQLAlchemy's own execution does, for every kind of column the schema has, and
run through SQLAlchemy on any other driver."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
import sqlalchemy as sa

from episodic.store.direct import Direct
from episodic.store.schema import ID, Json, UtcDateTime

_TABLE = sa.Table(
    "things",
    sa.MetaData(),
    sa.Column("tenant_id", ID, primary_key=True),
    sa.Column("seq", sa.BigInteger, primary_key=True, autoincrement=False),
    sa.Column("at", UtcDateTime, nullable=False),
    sa.Column("ended_at", UtcDateTime),
    sa.Column("doc", Json),
    sa.Column("flag", sa.Boolean, nullable=False),
    sa.Column("state", sa.String(16), nullable=False),
)
_ROWS: list[dict[str, Any]] = [
    {
        "tenant_id": "t",
        "seq": 1,
        "at": datetime(2026, 12, 4, 10, 11, 12, 123456, tzinfo=UTC),
        "ended_at": None,
        "doc": {"k": ["v", 1, None], "ü": "ß"},
        "flag": True,
        "state": "open",
    },
    {
        "tenant_id": "t",
        "seq": 2,
        "at": datetime(2026, 12, 4, 5, 0, tzinfo=timezone(timedelta(hours=-5))),
        "ended_at": datetime(2026, 12, 5, tzinfo=UTC),
        "doc": None,
        "flag": False,
        "state": "closed",
    },
]
_BY_KEY = sa.select(_TABLE).where(
    _TABLE.c.tenant_id == sa.bindparam("b_0"), _TABLE.c.seq == sa.bindparam("b_1")
)


@pytest.fixture
def conn() -> Iterator[sa.Connection]:
    engine = sa.create_engine("sqlite://")
    _TABLE.metadata.create_all(engine)
    with engine.connect() as connection:
        yield connection
    engine.dispose()


def _raw(conn: sa.Connection) -> list[tuple[Any, ...]]:
    driver = conn.connection.driver_connection
    assert driver is not None
    return list(driver.execute("SELECT * FROM things ORDER BY seq"))


def test_rows_written_direct_are_stored_as_sqlalchemy_stores_them(conn: sa.Connection) -> None:
    with conn.begin():
        conn.execute(_TABLE.insert(), _ROWS)
    by_sqlalchemy = _raw(conn)
    with conn.begin():
        conn.execute(_TABLE.delete())
    with conn.begin():
        Direct(_TABLE.insert()).execute(conn, _ROWS[:1])  # one row, then many
        Direct(_TABLE.insert()).execute(conn, _ROWS[1:])
    assert _raw(conn) == by_sqlalchemy


def test_a_row_read_direct_is_the_row_sqlalchemy_reads(conn: sa.Connection) -> None:
    with conn.begin():
        conn.execute(_TABLE.insert(), _ROWS)
    direct = Direct(_BY_KEY)
    for row in _ROWS:
        key = {"b_0": row["tenant_id"], "b_1": row["seq"]}
        expected = conn.execute(_BY_KEY, key).mappings().first()
        read = direct.first(conn, key)
        assert read == dict(expected or {})
        assert read is not None and read["at"] == row["at"] and read["at"].tzinfo is UTC
    assert direct.first(conn, {"b_0": "t", "b_1": 99}) is None


def test_rows_read_direct_are_the_rows_sqlalchemy_reads_in_order(conn: sa.Connection) -> None:
    with conn.begin():
        conn.execute(_TABLE.insert(), _ROWS)
    newest_first = (
        sa.select(_TABLE).where(_TABLE.c.tenant_id == sa.bindparam("b_0")).order_by(_TABLE.c.seq.desc())
    )
    expected = [dict(r) for r in conn.execute(newest_first, {"b_0": "t"}).mappings()]
    assert Direct(newest_first).all(conn, {"b_0": "t"}) == expected
    assert [r["seq"] for r in expected] == [2, 1]
    assert Direct(newest_first).all(conn, {"b_0": "nobody"}) == []


def test_an_update_with_a_literal_in_it_keeps_the_literal(conn: sa.Connection) -> None:
    with conn.begin():
        conn.execute(_TABLE.insert(), _ROWS)
    close = (
        sa.update(_TABLE)
        .where(_TABLE.c.tenant_id == sa.bindparam("b_0"), _TABLE.c.state == "open")
        .values(state="closed", ended_at=sa.bindparam("v_at"))
    )
    moment = datetime(2026, 12, 6, 1, 2, 3, tzinfo=UTC)
    with conn.begin():
        Direct(close).execute(conn, [{"b_0": "t", "v_at": moment}])
    rows = conn.execute(sa.select(_TABLE.c.seq, _TABLE.c.state, _TABLE.c.ended_at)).all()
    assert [tuple(r) for r in rows] == [
        (1, "closed", moment),
        (2, "closed", datetime(2026, 12, 5, tzinfo=UTC)),
    ]


def test_a_write_direct_belongs_to_the_transaction_around_it(conn: sa.Connection) -> None:
    def failing_batch() -> None:
        with conn.begin():
            Direct(_TABLE.insert()).execute(conn, _ROWS)
            raise RuntimeError("the batch failed")

    with pytest.raises(RuntimeError):
        failing_batch()
    assert _raw(conn) == []


def test_a_statement_with_expanding_parameters_is_refused(conn: sa.Connection) -> None:
    among = sa.select(_TABLE).where(_TABLE.c.seq.in_(sa.bindparam("b_seqs", expanding=True)))
    with pytest.raises(TypeError, match="plain positional"):
        Direct(among).first(conn, {"b_seqs": [1, 2]})


async def test_on_another_driver_the_statement_runs_through_sqlalchemy(tmp_path: Any) -> None:
    from sqlalchemy.ext.asyncio import create_async_engine

    engine = create_async_engine(f"sqlite+aiosqlite:///{tmp_path}/a.db")
    async with engine.begin() as conn:
        await conn.run_sync(_TABLE.metadata.create_all)
        await conn.run_sync(lambda sync: Direct(_TABLE.insert()).execute(sync, _ROWS))
        read = await conn.run_sync(lambda sync: Direct(_BY_KEY).first(sync, {"b_0": "t", "b_1": 1}))
    await engine.dispose()
    assert read is not None and read["doc"] == _ROWS[0]["doc"]
