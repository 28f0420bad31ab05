"""PII policy on a live server: under `redact`, personal data is replaced by typed
placeholders before it is stored (content, tool payloads, metadata), digested and
embedded, or rendered; an agent's own policy overrides its tenant's and the server's."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from google.protobuf import struct_pb2

from episodic.domain.model import PiiPolicy
from episodic.v1 import agent_pb2, episode_pb2, memory_pb2, memory_service_pb2
from tests.e2e.context_helpers import build, create_agent, get_call
from tests.e2e.helpers import Client
from tests.server_harness import KEY_A, KEY_B, TENANT_B, running_server, settings_for

EMAIL, CARD, PHONE = "mary.k@example.com", "4111 1111 1111 1111", "+44 20 7946 0958"
SAID = f"Reach me at {EMAIL} or {PHONE}; my card is {CARD}."


@pytest.fixture
def database_url(sqlite_url: str) -> str:
    """One backend: what these tests check is the same over either store (the stores are
    held to one behaviour on both by tests/contracts and tests/integration)."""
    return sqlite_url


@pytest.fixture
async def redacting(database_url: str) -> AsyncIterator[tuple[Client, Client]]:
    """Tenant A redacts (server default); tenant B is set to off."""
    settings = settings_for(database_url, pii_policy=PiiPolicy.REDACT, pii_tenant_policies=f"{TENANT_B}=off")
    async with running_server(settings) as server, server.channel() as channel:
        yield Client.of(channel, KEY_A), Client.of(channel, KEY_B)


def tool_messages() -> list[episode_pb2.MessageInput]:
    arguments = struct_pb2.Struct()
    arguments.update({"email": EMAIL})
    call = episode_pb2.ToolCall(tool_call_id="c1", tool_name="crm_lookup", input=arguments)
    result = episode_pb2.ToolResult(tool_call_id="c1", succeeded=True)
    result.output.string_value = f"customer {EMAIL}, card {CARD}"
    return [
        episode_pb2.MessageInput(role=episode_pb2.ROLE_ASSISTANT, tool_calls=[call]),
        episode_pb2.MessageInput(role=episode_pb2.ROLE_TOOL, tool_result=result),
    ]


def said(text: str = SAID) -> episode_pb2.MessageInput:
    metadata = struct_pb2.Struct()
    metadata.update({"from": EMAIL})
    return episode_pb2.MessageInput(role=episode_pb2.ROLE_USER, content=text, metadata=metadata)


def leaks(text: str) -> list[str]:
    return [value for value in (EMAIL, CARD, PHONE, "4111") if value in text]


async def test_stored_messages_tool_payloads_and_metadata_keep_only_placeholders(
    redacting: tuple[Client, Client],
) -> None:
    alice, _ = redacting
    episode_id = await alice.open_episode()
    await alice.add(episode_id, said(), *tool_messages())
    log = await alice.log_of(episode_id)
    assert log[0].content == "Reach me at [EMAIL] or [PHONE]; my card is [CARD]."
    assert not leaks(str(log)), leaks(str(log))
    assert "[EMAIL]" in str(log[1].tool_calls[0].input) and "[CARD]" in log[2].tool_result.output.string_value


async def test_digests_and_rendered_contexts_never_see_the_raw_values(
    redacting: tuple[Client, Client],
) -> None:
    alice, _ = redacting
    agent_id = await create_agent(alice, recall_mode=agent_pb2.RECALL_MODE_RECENCY)
    earlier = await alice.open_episode(agent_id, user_id="mary")
    await alice.add(earlier, said(), said("Please send the invoice to my email address."))
    digest = (await alice.close_digested(earlier)).digest
    assert digest.state == episode_pb2.DIGEST_STATE_READY and not leaks(str(digest))
    now = await alice.open_episode(agent_id, user_id="mary")
    built = await build(alice, now, user_message=f"Use {EMAIL} please", append_user_message=True)
    assert built.messages[-1].content == "Use [EMAIL] please"
    assert not leaks(str(built.messages)) and built.report.recalled_episodes
    assert not leaks(str((await get_call(alice, built.report.model_call_id)).messages))


async def test_an_agents_policy_overrides_its_tenants(redacting: tuple[Client, Client]) -> None:
    alice, bob = redacting
    keeps = await create_agent(alice, pii_policy=agent_pb2.PII_POLICY_OFF)
    kept = await alice.open_episode(keeps)
    await alice.add(kept, said())
    assert (await alice.log_of(kept))[0].content == SAID
    plain = await bob.open_episode()  # tenant B: off
    await bob.add(plain, said())
    assert (await bob.log_of(plain))[0].content == SAID
    strict = await create_agent(bob, pii_policy=agent_pb2.PII_POLICY_REDACT)
    redacted = await bob.open_episode(strict)
    await bob.add(redacted, said())
    assert not leaks((await bob.log_of(redacted))[0].content)


async def test_memories_and_session_data_keep_only_placeholders(redacting: tuple[Client, Client]) -> None:
    """Client memories (text, topics, entities), extracted ones, and session data values are
    redacted before they are stored or embedded; tenant B, set to off, keeps them."""
    alice, bob = redacting
    episode_id = await alice.open_episode()
    await alice.add(episode_id, said("My email is mary.k@example.com and I love sailing."))
    written = memory_service_pb2.MemoryInput(
        text=SAID, kind=memory_pb2.MEMORY_KIND_FACT, topics=[EMAIL], entities=[PHONE]
    )
    create = memory_service_pb2.CreateMemoriesRequest(episode_id=episode_id, memories=[written])
    await alice.memories.CreateMemories(create, metadata=alice.auth)
    data = struct_pb2.Struct()
    data.update({"contact": {"card": CARD}})
    update = memory_service_pb2.UpdateSessionDataRequest(episode_id=episode_id, data=data)
    stored = (await alice.memories.UpdateSessionData(update, metadata=alice.auth)).session_data
    assert not leaks(str(stored)) and "[CARD]" in str(stored)
    await alice.close_digested(episode_id)  # the digest's memories, waited on by state
    listing = memory_service_pb2.ListMemoriesRequest(
        agent_id=await _agent_of(alice, episode_id), user_id="mary"
    )
    memories = (await alice.memories.ListMemories(listing, metadata=alice.auth)).memories
    assert len(memories) >= 2 and not leaks(str(memories)), leaks(str(memories))

    kept = await bob.open_episode()
    create = memory_service_pb2.CreateMemoriesRequest(episode_id=kept, memories=[written])
    made = (await bob.memories.CreateMemories(create, metadata=bob.auth)).results[0].memory
    assert made.text == SAID


async def _agent_of(client: Client, episode_id: str) -> str:
    return (await client.get_episode(episode_id)).agent_id
