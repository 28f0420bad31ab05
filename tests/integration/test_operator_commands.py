"""The operator's command line, in process (`episodic.cli.main`): --version, a healthcheck that
prints what it saw, `model-call` reading a stored call from the database, and configuration
problems reported as configuration. The lab's eval without its data says so in one line."""

from __future__ import annotations

import asyncio
import importlib.metadata
import json
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1.health import aio as health_aio  # type: ignore[attr-defined]  # not in the stubs

from episodic.bootstrap.lifecycle import open_app
from episodic.cli.main import main
from episodic.config import EmbedderKind, Settings
from episodic.domain.agents import AgentDraft
from episodic.domain.model import Caller, NewMessage, Role, ToolCall, ToolResult
from episodic.service.context import ContextRequest
from episodic.store.lease import SqliteLease
from episodic_lab.cli import main as lab_main
from tests.server_harness import running_server, settings_for

TENANT = "acme"


pytestmark = pytest.mark.usefixtures("restored_logging")  # main() sets up logging


# --- --version ----------------------------------------------------------------------------


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version_prints_the_installed_version_and_exits_0(
    flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main([flag])
    assert exited.value.code == 0
    assert capsys.readouterr().out == f"episodic {importlib.metadata.version('episodic')}\n"


# --- healthcheck ------------------------------------------------------------------------


async def healthcheck(*args: str) -> int:
    """The probe is synchronous; the server under test runs on this test's event loop."""
    return await asyncio.to_thread(main, ["healthcheck", *args])


async def test_healthcheck_prints_serving_and_exits_0_against_a_running_server(
    sqlite_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    async with running_server(settings_for(sqlite_url)) as server:
        code = await healthcheck("--address", server.address)
    assert (code, capsys.readouterr().out) == (0, "SERVING\n")


@asynccontextmanager
async def health_server(status: health_pb2.HealthCheckResponse.ServingStatus.ValueType) -> AsyncIterator[str]:
    """A bare gRPC health service reporting `status` for the whole server."""
    server = grpc.aio.server()
    servicer = health_aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await servicer.set("", status)
    await server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        await server.stop(None)


async def test_healthcheck_prints_not_serving_and_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    async with health_server(health_pb2.HealthCheckResponse.NOT_SERVING) as address:
        code = await healthcheck("--address", address)
    assert (code, capsys.readouterr().out) == (1, "NOT_SERVING\n")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_healthcheck_says_why_a_server_is_unreachable_and_exits_1(
    capsys: pytest.CaptureFixture[str],
) -> None:
    address = f"127.0.0.1:{free_port()}"
    code = await healthcheck("--address", address)
    out = capsys.readouterr().out
    assert code == 1 and out.startswith(f"unreachable: {address}") and out.count("\n") == 1


async def test_healthcheck_over_tls_against_a_plaintext_server_reports_the_tls_failure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_bytes(b"-----BEGIN CERTIFICATE-----\nnot a certificate\n-----END CERTIFICATE-----\n")
    async with health_server(health_pb2.HealthCheckResponse.SERVING) as address:
        code = await healthcheck("--address", address, "--tls")
    out = capsys.readouterr().out
    assert code == 1 and out.startswith(("TLS failed", "unreachable")) and out.count("\n") == 1


# --- model-call ---------------------------------------------------------------------------


async def stored_call(database_url: str) -> str:
    """A conversation with a tool call whose JSON holds integers, and one BuildContext."""
    settings = Settings(database_url=database_url, embedder=EmbedderKind.HASHING, insecure_dev=True)
    async with open_app(settings) as app:
        s, caller = app.services, Caller(TENANT)
        await s.agents.create_agent(caller, AgentDraft("helper", system_prompt="Be brief.", model="gpt-4o"))
        episode, _ = await s.episodes.open_episode(caller, agent_id="helper", user_id="mary")
        weather = ToolCall("c1", "weather", {"city": "Lisbon", "days": 16.0, "ratio": 0.5})
        await s.episodes.add_messages(
            caller,
            episode.episode_id,
            [
                NewMessage(Role.USER, "How warm is it in Lisbon?"),
                NewMessage(Role.ASSISTANT, "", tool_calls=(weather,)),
                NewMessage(
                    Role.TOOL, "", tool_result=ToolResult("c1", {"celsius": 21.0, "rain": 0.25}, True)
                ),
            ],
        )
        request = ContextRequest(episode.episode_id, "And tomorrow?", append_user_message=True)
        call, _ = await s.context.build(caller, request)
        return call.model_call_id


@pytest.fixture
def call_in(tmp_path: Path) -> tuple[str, str]:
    url = f"sqlite:///{tmp_path / 'calls.db'}"
    return url, asyncio.run(stored_call(url))


def test_model_call_prints_the_rendered_context_readably(
    call_in: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    url, call_id = call_in
    assert main(["model-call", call_id, "--tenant", TENANT, "--database-url", url]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"model call {call_id}\n")
    for expected in ("episode ", "turn ", "user message seq 4", "trace id ", "budget ", "history "):
        assert expected in out
    blocks = [line for line in out.splitlines() if line.startswith("[")]
    assert blocks[0].startswith("[system] (system)") and blocks[-1].startswith("[user] (user_message)")
    assert '-> weather({"city": "Lisbon", "days": 16, "ratio": 0.5})' in out
    assert '{"celsius": 21, "rain": 0.25}' in out  # integers as integers, fractions kept


def test_model_call_json_is_the_api_shape(
    call_in: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    url, call_id = call_in
    assert main(["model-call", call_id, "--tenant", TENANT, "--database-url", url, "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["modelCallId"] == call_id and printed["messages"][0]["role"] == "ROLE_SYSTEM"


def test_model_call_of_another_tenant_or_an_unknown_id_is_not_found_with_exit_1(
    call_in: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    url, call_id = call_in
    assert main(["model-call", call_id, "--tenant", "globex", "--database-url", url]) == 1
    assert main(["model-call", "mc_nope", "--tenant", TENANT, "--database-url", url]) == 1
    err = capsys.readouterr().err
    assert f"no model call {call_id!r} in tenant 'globex'" in err and "'mc_nope'" in err


def test_model_call_never_creates_a_database(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "missing.db"
    assert main(["model-call", "mc_x", "--tenant", TENANT, "--database-url", f"sqlite:///{missing}"]) == 2
    assert "database_url: no database at" in capsys.readouterr().err
    assert not missing.exists()


def test_model_call_takes_only_the_database_flags(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["model-call", "--help"])
    out = capsys.readouterr().out
    assert (
        "--database-url" in out and "--tenant" in out and "--address" not in out and "--embedder" not in out
    )


# --- configuration errors -----------------------------------------------------------------


def test_a_bad_database_url_is_reported_as_configuration(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["migrate", "--database-url", "mysql://db/x"]) == 2
    err = capsys.readouterr().err
    assert err == "episodic: invalid configuration: database_url: must be a sqlite:// or postgresql:// URL\n"


def test_a_bad_log_level_names_the_setting_instead_of_an_unexpected_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["migrate", "--database-url", f"sqlite:///{tmp_path / 'x.db'}", "--log-level", "loud"]) == 2
    wanted = "episodic: --log-level: 'loud' is not one of DEBUG, INFO, WARNING, ERROR, CRITICAL\n"
    assert capsys.readouterr().err == wanted


# --- the lab without its data -------------------------------------------------------------


@pytest.mark.parametrize("tool", [["eval-recall"], ["eval-recall", "--what-the-model-sees"]])
def test_eval_recall_without_the_locomo_data_says_where_it_looked_and_exits_2(
    tool: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert lab_main([*tool, "--data", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"episodic-lab eval-recall: no LoCoMo data in {tmp_path}") and "--data DIR" in err
    assert err.count("\n") == 1


@pytest.mark.parametrize("command", ["migrate", "reindex"])
def test_migrate_and_reindex_refuse_a_file_being_restored_and_leave_it_free_after(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Like a server, they lease the SQLite file while they have it open: a restore (which
    holds the file alone) is not swapped in under them, nor they under it."""
    database = tmp_path / "episodic.db"
    flags = ["--database-url", f"sqlite:///{database}", "--embedder", "hashing"]
    assert main(["migrate", *flags[:2]]) == 0
    with SqliteLease(database, exclusive=True):  # what `episodic restore` holds
        assert main([command, *flags[: 4 if command == "reindex" else 2]]) == 2
    assert "is being replaced by `episodic restore`" in capsys.readouterr().err
    assert main([command, *flags[: 4 if command == "reindex" else 2]]) == 0
    SqliteLease(database, exclusive=True).release()  # they let it go when they end
