"""Running the server until SIGTERM/SIGINT, then draining gracefully."""

from __future__ import annotations

import asyncio
import gc
import logging
import signal
import sys

from episodic.bootstrap.fd_limit import quiet_accept_failures, raise_open_files_limit
from episodic.bootstrap.lifecycle import open_app, serve_app
from episodic.config import Settings, TlsMaterial
from episodic.edges.grpc.server import AddressInUse, address_problem
from episodic.store.database import normalize_url

log = logging.getLogger("episodic.server")

BANNER_WIDTH = 72


def dev_banner(tenant: str) -> str:
    """The insecure-dev warning, boxed in asterisks: every line as wide as the widest
    (at least BANNER_WIDTH), so the right border stays straight for any tenant name."""
    lines = [
        "EPISODIC IS RUNNING IN INSECURE DEV MODE",
        f"Requests that carry no API key are served as tenant {tenant!r}",
        "Never expose this server or use this mode in production.",
    ]
    inner = max(BANNER_WIDTH - 6, *(len(line) for line in lines))
    rule = "*" * (inner + 6)
    return "\n".join([rule, *(f"*  {line:<{inner}}  *" for line in lines), rule])


async def serve(settings: Settings) -> None:
    """Serves until SIGTERM/SIGINT. An address that cannot be listened on is the first thing
    said; when serving, one line says where (gRPC, inspector, metrics) and on what database."""
    problem = address_problem(settings.address)  # before anything is said or opened: fail fast
    if problem is not None:
        raise AddressInUse(f"address: cannot listen on {settings.address}: {problem}")
    raise_open_files_limit()
    quiet_accept_failures()
    hand_over_the_gil_sooner(settings)
    if settings.insecure_dev:
        print(dev_banner(settings.dev_tenant), file=sys.stderr, flush=True)
    stop = stop_on_signals()  # before anything can report ready, so no SIGTERM is missed
    async with open_app(settings) as app, serve_app(app) as grpc_server:
        freeze_start_up()  # before "serving" is told: nobody calls yet
        log.info("serving", extra=serving_fields(settings, grpc_server.port, transport_of(app.tls)))
        await stop.wait()
        log.info("shutting down", extra={"grace_seconds": settings.shutdown_grace_seconds})
    log.info("stopped")


def serving_fields(settings: Settings, port: int, transport: str) -> dict[str, object]:
    """What the one "serving" line says: where gRPC listens (the port it bound), the
    inspector and metrics when on, the database (its password hidden); `port`, `address`
    and `transport` as before, for what reads the JSON line."""
    host = settings.address.rpartition(":")[0]
    fields: dict[str, object] = {"grpc": f"{host}:{port}", "transport": transport}
    if settings.inspector_address:
        fields["inspector"] = f"http://{settings.inspector_address}/"
    if settings.metrics_address:
        fields["metrics"] = f"http://{settings.metrics_address}/metrics"
    fields["database"] = normalize_url(settings.database_url).render_as_string(hide_password=True)
    return fields | {"insecure_dev": settings.insecure_dev, "address": settings.address, "port": port}


def transport_of(tls: TlsMaterial | None) -> str:
    if tls is None:
        return "plaintext"
    return "tls" if tls.client_ca is None else "mtls"


def hand_over_the_gil_sooner(settings: Settings) -> None:
    """The event loop holds the GIL most of a turn; the threads it hands work to (the query
    embedding, SQLite, gRPC's) each wait for it to give the GIL up before they can finish.
    Python's default switch interval (5 ms) suits threads that compute; here a shorter one
    lets a 1.4 ms query embedding come back in ~2.5 ms beside a busy loop instead of ~8-13 ms."""
    sys.setswitchinterval(settings.gil_switch_interval_ms / 1000)


def freeze_start_up() -> None:
    """Start-up's objects (modules, classes, functions, the app's wiring: ~150k the collector
    tracks) live as long as the process: frozen, a full collection walks only what calls and
    caches made since. Unfrozen, one took 110-150 ms with an agent of 100k chunks resident
    (bench-knowledge), stalling every call, and reading an agent's words or chunks in set off
    several; frozen, 27-39 ms. The collector, off while start-up ran (cli/main.py), is on
    again from here."""
    gc.collect()
    gc.freeze()
    gc.enable()


def stop_on_signals() -> asyncio.Event:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    return stop
