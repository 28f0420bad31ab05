"""PostgreSQL connection URLs: every multi-host form libpq accepts, as one normalized value.

libpq names several servers in a URL three ways, and SQLAlchemy's `make_url` reads only
some of them (the comma netloc breaks its port parsing):

    postgresql://u@h1:p1,h2:p2/db?target_session_attrs=read-write     netloc list
    postgresql://u@/db?host=h1,h2&port=p1,p2&target_session_attrs=...  host/port lists
    postgresql://u@/db?host=h1:p1&host=h2:p2                          repeated host (SQLAlchemy's)

`parse` reads any of them into a `PgTarget`; `to_sqlalchemy` renders it in the one form
SQLAlchemy's asyncpg dialect passes through whole (host and port lists), and every
connection, pooled or dedicated, is made from that URL by the dialect's own rules
(`store/database.py` `asyncpg_connect_args`). A host may be a name, an IPv4 or IPv6
address (`[::1]:5432` in a netloc) or a Unix socket directory (`%2Fvar%2Frun%2Fpostgresql`).
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass

from sqlalchemy.engine import URL

from episodic.errors import CONFIGURATION, InvalidArgument

DEFAULT_PORT = 5432
SCHEMES = frozenset({"postgresql", "postgres", "postgresql+asyncpg"})
# libpq's values; asyncpg implements each of them.
SESSION_ATTRS = frozenset({"any", "read-write", "read-only", "primary", "standby", "prefer-standby"})
# The server writes, so of several hosts it wants the writable one: libpq's default ("any")
# would settle for a standby while the primary is down.
SEVERAL_HOSTS_DEFAULT = "read-write"
# libpq keywords that name the target itself rather than a connection option.
_FIELDS = {"dbname": "database", "user": "user", "password": "password"}


@dataclass(frozen=True, slots=True)
class PgTarget:
    """The servers to try, in order, and how to log in. `params` are the other query
    parameters (target_session_attrs among them), in the URL's order."""

    hosts: tuple[str, ...] = ()
    ports: tuple[int, ...] = ()
    user: str | None = None
    password: str | None = None
    database: str | None = None
    params: tuple[tuple[str, str], ...] = ()


def is_postgres(raw: str) -> bool:
    return raw.partition("://")[0].lower() in SCHEMES


def parse(raw: str) -> PgTarget:
    """`raw` in any form libpq accepts (plus SQLAlchemy's repeated `host=h:p`)."""
    scheme, sep, rest = raw.partition("://")
    if not sep or scheme.lower() not in SCHEMES:
        raise _invalid("must be a sqlite:// or postgresql:// URL")
    rest, _, query = rest.partition("?")
    netloc, _, path = rest.partition("/")
    auth, at, hostspec = netloc.rpartition("@")
    pairs = _query_pairs(query)
    endpoints = _endpoints(pairs, hostspec)
    login = _login(auth if at else "", path, pairs)
    return PgTarget(
        hosts=tuple(host for host, _ in endpoints),
        ports=tuple(port for _, port in endpoints),
        user=login["user"] or None,
        password=login["password"] or None,
        database=login["database"] or None,
        params=_options(pairs, several_hosts=len(endpoints) > 1),
    )


def _login(auth: str, path: str, pairs: list[tuple[str, str]]) -> dict[str, str]:
    """user, password and database: from the URL's parts, then its query (libpq's order)."""
    user, _, password = auth.partition(":")
    login = {"user": _unquoted(user), "password": _unquoted(password), "database": _unquoted(path)}
    login.update((_FIELDS[key], value) for key, value in pairs if key in _FIELDS)
    return login


def _options(pairs: list[tuple[str, str]], *, several_hosts: bool) -> tuple[tuple[str, str], ...]:
    skipped = {"host", "port", *_FIELDS}
    params = [_param(key, value) for key, value in pairs if key not in skipped]
    if several_hosts and not any(key == "target_session_attrs" for key, _ in params):
        params.append(("target_session_attrs", SEVERAL_HOSTS_DEFAULT))
    return tuple(params)


def to_sqlalchemy(target: PgTarget) -> URL:
    """One TCP host stays in the netloc; several (or a socket directory) go in `host` and
    `port` lists, the form the asyncpg dialect hands to asyncpg as lists."""
    query: dict[str, str] = dict(target.params)
    host: str | None = None
    port: int | None = None
    if len(target.hosts) == 1 and not target.hosts[0].startswith("/"):
        host, port = target.hosts[0], target.ports[0]
    elif target.hosts:
        query = {
            "host": ",".join(target.hosts),
            "port": ",".join(str(p) for p in target.ports),
            **query,
        }
    return URL.create(
        "postgresql+asyncpg",
        username=target.user,
        password=target.password,
        host=host,
        port=port,
        database=target.database,
        query=query,
    )


def servers_of(url: URL) -> str:
    """Where `url` points, for an operator: `h1:p1, h2:p2` (never the password)."""
    hosts = url.query.get("host")
    if not hosts:
        return f"{url.host or 'localhost'}:{url.port or DEFAULT_PORT}"
    target = parse(url.set(drivername="postgresql").render_as_string(hide_password=True))
    return ", ".join(_shown(host, port) for host, port in zip(target.hosts, target.ports, strict=True))


def _shown(host: str, port: int) -> str:
    if host.startswith("/"):
        return f"{host} (socket, port {port})"
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _query_pairs(query: str) -> list[tuple[str, str]]:
    try:
        return urllib.parse.parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query))
    except ValueError:  # its message quotes the field, which may hold a password
        raise _invalid("has a malformed query string (each parameter is key=value)") from None


def _endpoints(pairs: list[tuple[str, str]], hostspec: str) -> list[tuple[str, int]]:
    """Hosts with their ports. `host=` parameters (repeated or comma lists) replace the
    netloc's hosts, as in libpq; `port=` gives one port for all or one per host."""
    hosts = [v for k, v in pairs if k == "host"]
    tokens = [t for v in hosts for t in v.split(",")] if hosts else _netloc_tokens(hostspec)
    named = [_host_token(t, in_netloc=not hosts) for t in tokens]
    ports = [p for k, v in pairs if k == "port" for p in v.split(",")]
    if not named:
        if len(ports) > 1:
            raise _invalid("names several ports but no host")
        return []
    return _with_ports(named, ports)


def _netloc_tokens(hostspec: str) -> list[str]:
    return hostspec.split(",") if hostspec else []


def _host_token(token: str, *, in_netloc: bool) -> tuple[str, str]:
    """(host, port text or ""). In a netloc: `h`, `h:p`, `[v6]`, `[v6]:p`, a %-encoded
    socket directory (`%2Ftmp:5433`). In `host=` (decoded already): also `/dir` and a
    bare IPv6 address, as libpq allows there."""
    if token.startswith("["):
        host, close, after = token[1:].partition("]")
        if not close or (after and not after.startswith(":")):
            raise _invalid("has a malformed [IPv6] host")
        return host, after[1:]
    if not in_netloc and (token.startswith("/") or token.count(":") > 1):
        return token, ""
    if token.count(":") > 1:
        raise _invalid("has an IPv6 host without [brackets]")
    host, _, port = token.partition(":")
    return (_unquoted(host) if in_netloc else host), port


def _with_ports(named: list[tuple[str, str]], ports: list[str]) -> list[tuple[str, int]]:
    if ports and any(inline for _, inline in named):
        raise _invalid("gives ports both in hosts and in port=")
    if len(ports) > 1 and len(ports) != len(named):
        raise _invalid(f"names {len(named)} hosts but {len(ports)} ports")
    texts = [ports[0]] * len(named) if len(ports) == 1 else ports or [p for _, p in named]
    if any(not host for host, _ in named):
        raise _invalid("has an empty host in its host list")
    return [(host, _port(text)) for (host, _), text in zip(named, texts, strict=True)]


def _port(text: str) -> int:
    if not text:
        return DEFAULT_PORT
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise _invalid(f"has an invalid port {text!r}")
    return int(text)


def _param(key: str, value: str) -> tuple[str, str]:
    if key == "target_session_attrs" and value not in SESSION_ATTRS:
        raise _invalid(f"target_session_attrs must be one of {', '.join(sorted(SESSION_ATTRS))}")
    if key == "sslmode":  # libpq's name; asyncpg's `ssl` takes the same values
        return "ssl", value
    return key, value


def _unquoted(text: str) -> str:
    return urllib.parse.unquote(text)


def _invalid(problem: str) -> InvalidArgument:
    return InvalidArgument.of("database_url", problem, subject=CONFIGURATION)
