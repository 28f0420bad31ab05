"""PostgreSQL URLs naming several servers, in every form libpq accepts: each becomes one
normalized URL, and every connection (the pool's, LISTEN's, the advisory locks') is made
from it with every host, in order, and the same target_session_attrs."""

from __future__ import annotations

import asyncpg
import pytest
from sqlalchemy.ext.asyncio import create_async_engine

from episodic.errors import InvalidArgument
from episodic.store.database import asyncpg_connect_args, normalize_url
from episodic.store.faults import Fault, classify, startup_failure
from episodic.store.pg_url import parse, servers_of

TWO_SERVERS = {"host": ["10.0.0.1", "10.0.0.2"], "port": [5441, 5442], "target_session_attrs": "read-write"}
SAME_TWO_SERVERS = [
    "postgresql://u:secret@10.0.0.1:5441,10.0.0.2:5442/db?target_session_attrs=read-write",
    "postgres://u:secret@10.0.0.1:5441,10.0.0.2:5442/db?target_session_attrs=read-write",
    "postgresql+asyncpg://u:secret@10.0.0.1:5441,10.0.0.2:5442/db?target_session_attrs=read-write",
    "postgresql://u:secret@/db?host=10.0.0.1,10.0.0.2&port=5441,5442&target_session_attrs=read-write",
    "postgresql://u:secret@/db?host=10.0.0.1:5441&host=10.0.0.2:5442&target_session_attrs=read-write",
    "postgresql://u:secret@/db?host=10.0.0.1&host=10.0.0.2&port=5441&port=5442&target_session_attrs=read-write",
    "postgresql:///db?host=10.0.0.1,10.0.0.2&port=5441,5442&user=u&password=secret&target_session_attrs=read-write",
    "postgresql://ignored@/db?host=10.0.0.1,10.0.0.2&port=5441,5442&user=u&password=secret&target_session_attrs=read-write",
]


def _connection(raw: str) -> dict[str, object]:
    args = asyncpg_connect_args(normalize_url(raw))
    return {
        key: args.get(key) for key in ("host", "port", "target_session_attrs", "user", "password", "database")
    }


@pytest.mark.parametrize("raw", SAME_TWO_SERVERS)
def test_every_multi_host_form_connects_to_every_host_in_order_with_its_session_attrs(raw: str) -> None:
    assert _connection(raw) == {**TWO_SERVERS, "user": "u", "password": "secret", "database": "db"}


@pytest.mark.parametrize("raw", SAME_TWO_SERVERS)
def test_the_pool_and_the_dedicated_connections_are_routed_by_the_same_rules(raw: str) -> None:
    url = normalize_url(raw)
    engine = create_async_engine(url)
    _args, pooled = engine.dialect.create_connect_args(url)
    dedicated = asyncpg_connect_args(url)
    assert {k: pooled[k] for k in dedicated} == dedicated
    assert {"host", "port", "target_session_attrs"} <= dedicated.keys()


@pytest.mark.parametrize("raw", SAME_TWO_SERVERS)
def test_a_normalized_url_reads_back_as_itself(raw: str) -> None:
    url = normalize_url(raw)
    assert normalize_url(url.render_as_string(hide_password=False)) == url


def test_a_port_given_once_applies_to_every_host_and_a_missing_port_is_5432() -> None:
    assert _connection("postgresql://u@/db?host=a,b&port=6000")["port"] == [6000, 6000]
    assert _connection("postgresql://u@a,b:6001/db")["port"] == [5432, 6001]


def test_ipv6_hosts_are_read_in_brackets_in_the_netloc_and_bare_in_host_lists() -> None:
    bracketed = _connection("postgresql://u@[::1]:5441,[fe80::2]/db")
    assert (bracketed["host"], bracketed["port"]) == (["::1", "fe80::2"], [5441, 5432])
    bare = _connection("postgresql://u@/db?host=::1,fe80::2&port=5441,5442")
    assert (bare["host"], bare["port"]) == (["::1", "fe80::2"], [5441, 5442])


def test_a_unix_socket_directory_is_a_host() -> None:
    assert _connection("postgresql://u@%2Fvar%2Frun%2Fpostgresql:5433/db")["host"] == "/var/run/postgresql"
    both = _connection("postgresql://u@/db?host=/tmp,10.0.0.2&port=5433,5432")
    assert (both["host"], both["port"]) == (["/tmp", "10.0.0.2"], [5433, 5432])


def test_a_single_host_url_keeps_its_familiar_form() -> None:
    url = normalize_url("postgresql://episodic:pw@db.internal:5432/episodic")
    assert (url.host, url.port, url.database, dict(url.query)) == ("db.internal", 5432, "episodic", {})
    assert url.drivername == "postgresql+asyncpg"


def test_libpq_sslmode_reaches_asyncpg_as_ssl() -> None:
    args = asyncpg_connect_args(normalize_url("postgresql://u@a:1,b:2/db?sslmode=require"))
    assert args["ssl"] == "require" and "sslmode" not in args


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ("postgresql://u@/db?host=a,b,c&port=1,2", "names 3 hosts but 2 ports"),
        ("postgresql://u@a:1,b/db?port=3", "gives ports both in hosts and in port="),
        ("postgresql://u@a:notaport/db", "has an invalid port 'notaport'"),
        ("postgresql://u@a:70000/db", "has an invalid port '70000'"),
        ("postgresql://u@a,,b/db", "has an empty host in its host list"),
        ("postgresql://u@::1/db", "has an IPv6 host without [brackets]"),
        ("postgresql://u@a/db?target_session_attrs=leader", "target_session_attrs must be one of"),
        ("postgresql://u@a/db?password:secret", "has a malformed query string (each parameter is key=value)"),
    ],
)
def test_a_malformed_multi_host_url_is_invalid_configuration_naming_the_problem(
    raw: str, problem: str
) -> None:
    with pytest.raises(InvalidArgument) as refused:
        normalize_url(raw)
    assert refused.value.message.startswith(f"invalid configuration: database_url: {problem}")
    assert "secret" not in refused.value.message


@pytest.mark.parametrize("raw", SAME_TWO_SERVERS)
def test_a_password_never_shows_where_the_url_is_logged_or_explained(raw: str) -> None:
    url = normalize_url(raw)
    shown = url.render_as_string(hide_password=True)  # the "serving" line and `backup`'s hint
    explained = startup_failure(ConnectionRefusedError(), url) or ""
    assert "secret" not in shown and "secret" not in explained and "secret" not in servers_of(url)
    assert "10.0.0.1:5441, 10.0.0.2:5442" in explained


def test_the_servers_of_a_url_are_listed_for_an_operator() -> None:
    assert servers_of(normalize_url("postgresql://u@[::1]:5441,h:5442/db")) == "[::1]:5441, h:5442"
    assert servers_of(normalize_url("postgresql://u@h/db")) == "h:5432"


def test_no_server_in_the_wanted_role_is_a_database_outage() -> None:
    assert classify(asyncpg.TargetServerAttributeNotMatched("none of the hosts match")) is Fault.UNAVAILABLE


def test_a_standby_refusing_a_write_is_a_database_outage() -> None:
    refused = asyncpg.ReadOnlySQLTransactionError("cannot execute INSERT in a read-only transaction")
    assert refused.sqlstate == "25006"
    assert classify(refused) is Fault.UNAVAILABLE


def test_parsing_keeps_other_parameters_in_order() -> None:
    target = parse("postgresql://u@a/db?application_name=x&target_session_attrs=primary&ssl=prefer")
    assert target.params == (
        ("application_name", "x"),
        ("target_session_attrs", "primary"),
        ("ssl", "prefer"),
    )


def test_several_hosts_without_session_attrs_want_the_writable_one() -> None:
    assert _connection("postgresql://u@a:1,b:2/db")["target_session_attrs"] == "read-write"
    assert _connection("postgresql://u@a:1,b:2/db?target_session_attrs=any")["target_session_attrs"] == "any"
    assert _connection("postgresql://u@a:1/db")["target_session_attrs"] is None  # one host: as given


def test_a_start_that_finds_no_primary_says_so_and_what_to_do() -> None:
    url = normalize_url("postgresql://u:secret@a:1,b:2/db?target_session_attrs=read-write")
    found = startup_failure(asyncpg.TargetServerAttributeNotMatched("none match"), url)
    assert found == (
        "no server at a:1, b:2 is read-write (target_session_attrs): is the primary lost "
        "with no standby promoted yet? promote one, or fix database_url"
    )
    standby = startup_failure(
        asyncpg.ReadOnlySQLTransactionError("read-only"), normalize_url("postgresql://u@s/db")
    )
    assert standby is not None and standby.startswith("the database at s:5432 is a standby (read-only)")
