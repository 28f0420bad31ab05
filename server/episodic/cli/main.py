"""The `episodic` command: serve (default), migrate, keygen, healthcheck, config-docs, reindex,
model-call, mcp, export, import, erase, backup, restore; `--version`. No command, or flags
only, means serve; a first word that is neither a command nor a flag is refused (exit 2).
The measuring tools are the lab's (`episodic-lab`, in lab/), not the product's."""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib.metadata
import sys
import traceback
from collections.abc import Sequence

from episodic import config
from episodic.cli.backup import add_commands as add_backup_commands
from episodic.cli.erase import add_command as add_erase_command
from episodic.cli.mcp import add_command as add_mcp_command
from episodic.cli.transfer import add_transfer_commands
from episodic.edges.keys import KeyConfigError, KeyRing, config_line, new_key
from episodic.errors import EpisodicError
from episodic.logs import configure_logging

COMMANDS = (
    "serve",
    "migrate",
    "keygen",
    "healthcheck",
    "config-docs",
    "reindex",
    "model-call",
    "mcp",
    "export",
    "import",
    "erase",
    "backup",
    "restore",
)
VERSION_FLAGS = ("-V", "--version")


def main(argv: Sequence[str] | None = None) -> int:
    """A failure to start is one line on stderr and exit code 2; `--debug` adds the
    traceback."""
    words = list(sys.argv[1:] if argv is None else argv)
    unknown = _unknown_command(words)
    if unknown is not None:
        print(unknown, file=sys.stderr)
        return 2
    args = _parser().parse_args(_with_default_command(words))
    debug = bool(getattr(args, "debug", False))
    try:
        return int(args.run(args))
    except (config.ConfigError, EpisodicError) as exc:
        return _failed(str(exc), debug)
    except Exception as exc:
        what = f"{type(exc).__module__}.{type(exc).__qualname__}"
        return _failed(f"unexpected error ({what}); run again with --debug for the traceback", debug)


def _failed(line: str, debug: bool) -> int:
    if debug:
        traceback.print_exc()
    print(f"episodic: {line}", file=sys.stderr)
    return 2


def _unknown_command(argv: list[str]) -> str | None:
    """The line refusing a first word that is not a command (flags only still mean serve)."""
    if not argv or argv[0].startswith("-") or argv[0] in COMMANDS:
        return None
    return (
        f"episodic: unknown command {argv[0]!r} (commands: {', '.join(COMMANDS)}; "
        "`episodic --help` says what each does)"
    )


def _with_default_command(argv: list[str]) -> list[str]:
    """No command (or flags only) means `serve`; help and the version are the top level's own."""
    top_level = argv[:1] in (["-h"], ["--help"]) or (argv[:1] and argv[0] in VERSION_FLAGS)
    return argv if (argv[:1] and argv[0] in COMMANDS) or top_level else ["serve", *argv]


def version() -> str:
    """The installed distribution's version (pyproject.toml's, as pip recorded it)."""
    try:
        return importlib.metadata.version("episodic")
    except importlib.metadata.PackageNotFoundError:
        return "unknown (not installed)"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="episodic", description="Episodic memory service for LLM agents.")
    parser.add_argument(*VERSION_FLAGS, action="version", version=f"episodic {version()}")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the gRPC server (default)")
    config.add_flags(serve, "serve")
    _add_debug_flag(serve)
    serve.set_defaults(run=_serve)
    migrate = commands.add_parser("migrate", help="apply database migrations and exit")
    config.add_flags(migrate, "migrate")
    _add_debug_flag(migrate)
    migrate.set_defaults(run=_migrate)
    keygen = commands.add_parser("keygen", help="make an API key and print its config entry")
    keygen.add_argument("tenant_id")
    keygen.add_argument(
        "--agents", default="", help="comma-separated agent ids the key may use [default: every agent]"
    )
    keygen.add_argument(
        "--knowledge-write",
        action="store_true",
        help="the key may also create, update and delete its agents' documents",
    )
    keygen.set_defaults(run=_keygen)
    health = commands.add_parser(
        "healthcheck", help="print the local server's health status; exit 0 only if it is SERVING"
    )
    health.add_argument("--address", default=None, help="HOST:PORT [default: EPISODIC_ADDRESS]")
    _add_probe_tls_flags(health)
    health.set_defaults(run=_healthcheck)
    docs = commands.add_parser(
        "config-docs", help="print the configuration tables (Markdown), or a config file's template"
    )
    docs.add_argument(
        "--toml",
        action="store_true",
        help="print a TOML config file: every setting at its default, commented out",
    )
    docs.set_defaults(run=_config_docs)
    reindex = commands.add_parser(
        "reindex", help="digest pending episodes and re-embed stale vectors, then exit"
    )
    config.add_flags(reindex, "reindex")
    reindex.set_defaults(run=_reindex)
    _add_model_call(commands)
    add_mcp_command(commands)
    add_transfer_commands(commands)
    add_erase_command(commands)
    add_backup_commands(commands)
    return parser


def _add_model_call(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    model_call = commands.add_parser(
        "model-call", help="print a stored model call (what a BuildContext rendered) from the database"
    )
    model_call.add_argument("model_call_id", metavar="CALL_ID", help="the model call's id")
    model_call.add_argument(
        "--tenant",
        default=None,
        help="the tenant the call belongs to [default: the dev tenant, with --insecure-dev]",
    )
    model_call.add_argument("--json", action="store_true", help="print the call as the API returns it")
    config.add_flags(model_call, "model-call")
    _add_debug_flag(model_call)
    model_call.set_defaults(run=_model_call)


def _config_docs(args: argparse.Namespace) -> int:
    print(config.toml_template() if args.toml else config.markdown_table(), end="")
    return 0


def _model_call(args: argparse.Namespace) -> int:
    from episodic.cli.model_call import run

    return run(_settings(args), args)


def _add_debug_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--debug", action="store_true", help="on a failure to start, print the full traceback too"
    )


def _reindex(args: argparse.Namespace) -> int:
    from episodic.cli.reindex import reindex

    done = asyncio.run(reindex(_settings(args)))
    print(f"reindexed {done} digests")
    return 0


def _settings(args: argparse.Namespace) -> config.Settings:
    settings = config.load_process(args)
    configure_logging(settings.log_level)
    return settings


def _serve(args: argparse.Namespace) -> int:
    # Start-up makes ~150k objects that live as long as the process: the collector would walk
    # them again and again while modules import (~0.2 s of a start); it runs once, when they
    # are all made, and they are frozen (serve.freeze_start_up, which enables it again).
    gc.disable()
    try:
        settings = _settings(args)  # a bad setting is said before the engine is imported (~1 s)
        from episodic.cli.serve import serve

        asyncio.run(serve(settings))
    finally:
        gc.enable()
    return 0


def _migrate(args: argparse.Namespace) -> int:
    from episodic.bootstrap.schema import migrate_database

    _, revision = asyncio.run(migrate_database(_settings(args).database_url))
    print(f"database at revision {revision}")
    return 0


def _add_probe_tls_flags(health: argparse.ArgumentParser) -> None:
    health.add_argument("--tls", action="store_true", help="speak TLS, trusting the system's CAs")
    health.add_argument(
        "--tls-ca", default="", help="PEM CA that signed the server's certificate (implies --tls)"
    )
    health.add_argument("--tls-cert", default="", help="PEM client certificate, for a mutual-TLS server")
    health.add_argument("--tls-key", default="", help="PEM private key of --tls-cert")
    health.add_argument(
        "--tls-server-name", default="", help="name on the server's certificate, if not the probed host"
    )


def _healthcheck(args: argparse.Namespace) -> int:
    from episodic.cli.healthcheck import check, probe_tls

    address = args.address or config.address_of_process()
    tls = probe_tls(args.tls_ca, args.tls_cert, args.tls_key, args.tls_server_name, args.tls)
    seen = check(str(address), tls=tls)
    print(seen.line)
    return 0 if seen.serving else 1


def _keygen(args: argparse.Namespace) -> int:
    key = new_key()
    agents = [a.strip() for a in args.agents.split(",") if a.strip()]
    line = config_line(args.tenant_id, key, agents, knowledge_write=args.knowledge_write)
    try:
        KeyRing.parse(line)  # the same check the server applies, before a key is handed out
    except KeyConfigError as exc:
        raise config.ConfigError(str(exc)) from exc
    print(f"API key (give to the client, shown once): {key}")
    print(f"config entry (EPISODIC_API_KEYS or keys file): {line}")
    return 0
