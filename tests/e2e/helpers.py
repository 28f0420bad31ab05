"""Shared pieces of the e2e tests: a per-tenant client, rich-error decoding, and running
subprocesses (grpcurl, `episodic serve`) without blocking the event loop the in-process
server runs on."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import grpc
from google.rpc import error_details_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_status import rpc_status
from sqlalchemy import update

from episodic.domain.recall import DigestState
from episodic.store import schema
from episodic.store.database import open_database
from episodic.v1 import (
    agent_pb2,
    agent_service_pb2,
    diagnostics_service_pb2,
    episode_pb2,
    episode_service_pb2,
)
from episodic.v1.agent_service_pb2_grpc import AgentServiceStub
from episodic.v1.context_service_pb2_grpc import ContextServiceStub
from episodic.v1.diagnostics_service_pb2_grpc import DiagnosticsServiceStub
from episodic.v1.episode_service_pb2_grpc import EpisodeServiceStub
from episodic.v1.knowledge_service_pb2_grpc import KnowledgeServiceStub
from episodic.v1.memory_service_pb2_grpc import MemoryServiceStub
from tests.conftest import unique
from tests.polling import eventually
from tests.server_harness import bearer

if TYPE_CHECKING:
    from episodic.v1.agent_service_pb2_grpc import AgentServiceAsyncStub
    from episodic.v1.context_service_pb2_grpc import ContextServiceAsyncStub
    from episodic.v1.diagnostics_service_pb2_grpc import DiagnosticsServiceAsyncStub
    from episodic.v1.episode_service_pb2_grpc import EpisodeServiceAsyncStub
    from episodic.v1.knowledge_service_pb2_grpc import KnowledgeServiceAsyncStub
    from episodic.v1.memory_service_pb2_grpc import MemoryServiceAsyncStub

Metadata = tuple[tuple[str, str], ...]


# --- a client of one tenant -------------------------------------------------------------


@dataclass(frozen=True)
class Client:
    """Stubs of every service plus the credential of one tenant (empty: no credential)."""

    channel: grpc.aio.Channel
    auth: Metadata
    episodes: EpisodeServiceAsyncStub
    agents: AgentServiceAsyncStub
    diagnostics: DiagnosticsServiceAsyncStub
    context: ContextServiceAsyncStub
    memories: MemoryServiceAsyncStub
    knowledge: KnowledgeServiceAsyncStub

    @classmethod
    def of(cls, channel: grpc.aio.Channel, key: str | None) -> Client:
        auth = bearer(key) if key else ()
        return cls(
            channel,
            auth,
            EpisodeServiceStub(channel),
            AgentServiceStub(channel),
            DiagnosticsServiceStub(channel),
            ContextServiceStub(channel),
            MemoryServiceStub(channel),
            KnowledgeServiceStub(channel),
        )

    async def create_agent(self, agent_id: str | None = None, model: str = "gpt-4") -> str:
        """gpt-4 counts with cl100k_base, which a fresh server builds in half the time of
        o200k_base (every test gets a fresh server)."""
        agent_id = agent_id or unique("agent")
        request = agent_service_pb2.CreateAgentRequest(
            agent=agent_pb2.Agent(agent_id=agent_id, system_prompt="Be brief.", model=model)
        )
        await self.agents.CreateAgent(request, metadata=self.auth)
        return agent_id

    async def open_episode(
        self, agent_id: str | None = None, user_id: str = "mary", episode_id: str = ""
    ) -> str:
        if agent_id is None:
            agent_id = await self.create_agent()
        request = episode_service_pb2.OpenEpisodeRequest(
            agent_id=agent_id, user_id=user_id, episode_id=episode_id
        )
        opened = await self.episodes.OpenEpisode(request, metadata=self.auth)
        return opened.episode.episode_id

    async def add(self, episode_id: str, *messages: episode_pb2.MessageInput) -> list[episode_pb2.Message]:
        request = episode_service_pb2.AddMessagesRequest(episode_id=episode_id, messages=messages)
        return list((await self.episodes.AddMessages(request, metadata=self.auth)).messages)

    async def get_episode(self, episode_id: str) -> episode_pb2.Episode:
        request = episode_service_pb2.GetEpisodeRequest(episode_id=episode_id)
        return (await self.episodes.GetEpisode(request, metadata=self.auth)).episode

    async def close_digested(self, episode_id: str, **fields: Any) -> episode_pb2.Episode:
        """Closes the episode (`fields`: the rest of CloseEpisodeRequest) and returns it once
        its digest has settled (READY or FAILED), waiting on the state: see settled_digest."""
        request = episode_service_pb2.CloseEpisodeRequest(episode_id=episode_id, **fields)
        closed = (await self.episodes.CloseEpisode(request, metadata=self.auth)).episode
        closed.digest.CopyFrom(await settled_digest(lambda: self.get_episode(episode_id)))
        return closed

    async def log_of(self, episode_id: str) -> list[episode_pb2.Message]:
        """The whole log, oldest first, checked against the episode's message_count."""
        request = episode_service_pb2.ListMessagesRequest(episode_id=episode_id, page_size=1000)
        page = await self.episodes.ListMessages(request, metadata=self.auth)
        log = sorted(page.messages, key=lambda m: m.seq)
        assert [m.seq for m in log] == list(range(1, len(log) + 1)), "sequence numbers have gaps"
        assert (await self.get_episode(episode_id)).message_count == len(log)
        return log


# --- waiting for a digest -------------------------------------------------------------

SETTLED_DIGESTS = frozenset({episode_pb2.DIGEST_STATE_READY, episode_pb2.DIGEST_STATE_FAILED})
# A guard against a hang, never a measurement: a loaded machine digests late, and a test
# waits on the digest's state, not on a call's deadline (CloseEpisode's wait_for_digest).
DIGEST_SETTLE_SECONDS = 180.0


async def settled_digest(read: Callable[[], Awaitable[episode_pb2.Episode]]) -> episode_pb2.EpisodeDigest:
    """The digest of the episode `read` returns, once it is READY or FAILED (polled)."""
    latest = await read()

    async def settled() -> bool:
        nonlocal latest
        latest = await read()
        return latest.digest.state in SETTLED_DIGESTS

    if latest.digest.state not in SETTLED_DIGESTS:
        await eventually(settled, DIGEST_SETTLE_SECONDS)
    return latest.digest


def user_message(text: str, client_id: str = "") -> episode_pb2.MessageInput:
    return episode_pb2.MessageInput(role=episode_pb2.ROLE_USER, content=text, client_message_id=client_id)


def tool_call_message(*call_ids: str) -> episode_pb2.MessageInput:
    calls = [episode_pb2.ToolCall(tool_call_id=i, tool_name="search") for i in call_ids]
    return episode_pb2.MessageInput(role=episode_pb2.ROLE_ASSISTANT, tool_calls=calls)


def tool_result_message(call_id: str) -> episode_pb2.MessageInput:
    result = episode_pb2.ToolResult(tool_call_id=call_id, succeeded=True)
    result.output.string_value = "ok"
    return episode_pb2.MessageInput(role=episode_pb2.ROLE_TOOL, tool_result=result)


# --- rich errors ------------------------------------------------------------------------


async def rpc_error(call: Awaitable[object]) -> grpc.aio.AioRpcError:
    """Awaits a call that must fail and returns its error."""
    try:
        response = await call
    except grpc.aio.AioRpcError as err:
        return err
    raise AssertionError(f"the call succeeded, but it should have failed; it returned {response!r}")


def _details(err: grpc.aio.AioRpcError) -> list[Any]:
    status = rpc_status.from_call(err)  # type: ignore[arg-type]  # an AioRpcError is a call
    return list(status.details) if status is not None else []


def bad_request(err: grpc.aio.AioRpcError) -> error_details_pb2.BadRequest:
    """The rich status's BadRequest, every violation in order (repeated fields too)."""
    bad = error_details_pb2.BadRequest()
    for detail in _details(err):
        if detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            detail.Unpack(bad)
    return bad


def violations(err: grpc.aio.AioRpcError) -> dict[str, str]:
    """field -> description of every BadRequest field violation in the rich status."""
    found: dict[str, str] = {}
    for detail in _details(err):
        if detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            bad = error_details_pb2.BadRequest()
            detail.Unpack(bad)
            found.update({v.field: v.description for v in bad.field_violations})
    return found


def error_reason(err: grpc.aio.AioRpcError) -> str:
    for detail in _details(err):
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            return str(info.reason)
    return ""


def describe(err: grpc.aio.AioRpcError) -> str:
    return f"{err.code().name}: {err.details()!r} violations={violations(err)}"


async def expect_code(call: Awaitable[object], code: grpc.StatusCode) -> grpc.aio.AioRpcError:
    err = await rpc_error(call)
    assert err.code() == code, f"want {code.name}, got {describe(err)}"
    assert error_reason(err), f"no google.rpc.ErrorInfo in {describe(err)}"
    return err


async def expect_invalid(call: Awaitable[object], field: str, *, prefix: bool = False) -> dict[str, str]:
    """INVALID_ARGUMENT whose BadRequest names `field` (or a field under it, with prefix)."""
    err = await expect_code(call, grpc.StatusCode.INVALID_ARGUMENT)
    named = violations(err)
    if prefix:
        assert any(f.startswith(field) for f in named), f"no violation under {field!r}: {describe(err)}"
    else:
        assert field in named, f"no violation of {field!r}: {describe(err)}"
    return named


# --- liveness ---------------------------------------------------------------------------


async def assert_serving(channel: grpc.aio.Channel, auth: Metadata = ()) -> None:
    """The server still answers: health SERVING and an Echo round trip."""
    health = health_pb2_grpc.HealthStub(channel)
    reply = await health.Check(health_pb2.HealthCheckRequest(), timeout=10)
    assert reply.status == health_pb2.HealthCheckResponse.SERVING
    payload = os.urandom(16)
    echoed = await DiagnosticsServiceStub(channel).Echo(
        diagnostics_service_pb2.EchoRequest(payload=payload), metadata=auth, timeout=10
    )
    assert echoed.payload == payload


# --- subprocesses -----------------------------------------------------------------------


@dataclass(frozen=True)
class Completed:
    returncode: int
    stdout: str
    stderr: str


async def run_process(*argv: str, timeout: float = 30, env: Mapping[str, str] | None = None) -> Completed:
    """Runs a program to completion on the event loop (subprocess.run would block it, and
    with it any server this loop is serving)."""
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=dict(env) if env is not None else None,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise AssertionError(f"{argv[0]} did not finish within {timeout} s: {argv}") from None
    assert proc.returncode is not None
    return Completed(proc.returncode, out.decode(errors="replace"), err.decode(errors="replace"))


def clean_environment() -> dict[str, str]:
    """The test's environment without any EPISODIC_* setting, so only flags configure."""
    return {k: v for k, v in os.environ.items() if not k.startswith("EPISODIC_")}


async def operator_command(address: str, key: str, *argv: str) -> Completed:
    """`episodic ARGV --address ADDRESS` as an operator runs it against a live server: the
    key from EPISODIC_API_KEY, nothing else from the environment."""
    env = clean_environment() | {"EPISODIC_API_KEY": key}
    return await run_process(sys.executable, "-m", "episodic", *argv, "--address", address, env=env)


async def expire_digest_leases(database_url: str, agent_id: str) -> int:
    """A digest a killed server had claimed waits for its lease to run out before any server
    takes it again. Stands in for that wait: makes the agent's PENDING digests due now.
    Returns how many were still leased."""
    now = datetime.now(UTC)
    digests = schema.digests
    stmt = update(digests).where(
        digests.c.agent_id == agent_id,
        digests.c.state == DigestState.PENDING.value,
        digests.c.next_attempt_at > now,
    )
    database = open_database(database_url)
    try:
        async with database.engine.begin() as conn:
            return int((await conn.execute(stmt.values(next_attempt_at=now))).rowcount)
    finally:
        await database.dispose()
