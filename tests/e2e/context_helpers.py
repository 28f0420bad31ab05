"""BuildContext from the client side: run the stream, merge split messages, keep frames."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from episodic.v1 import agent_pb2, agent_service_pb2, context_pb2, context_service_pb2
from tests.conftest import unique
from tests.e2e.helpers import Client

# Thirty turns of this push a fact said before them out of a small budget's tail.
TRIP = [
    ("We fly to Lisbon on Friday morning and stay for ten days.", "Lovely, Lisbon in spring is mild."),
    ("I booked a small hotel in Alfama near the castle.", "Alfama is hilly; pack comfortable shoes."),
    ("Should we take the tram up to the viewpoints?", "Tram 28 goes there, but it gets crowded."),
    ("We also want a day trip to Sintra by train.", "Trains leave Rossio station every twenty minutes."),
    ("What about food, any dishes we must try?", "Try bacalhau, grilled sardines and pasteis de nata."),
]


@dataclass
class Built:
    frames: list[context_service_pb2.BuildContextResponse] = field(default_factory=list)

    @property
    def report(self) -> context_pb2.ContextReport:
        assert self.frames[-1].HasField("report"), "the last frame carries the report"
        return self.frames[-1].report

    @property
    def messages(self) -> list[context_pb2.ContextMessage]:
        """Streamed messages with their content parts joined, in index order."""
        merged: list[context_pb2.ContextMessage] = []
        for frame in self.frames:
            for part in frame.messages:
                if merged and merged[-1].index == part.index:
                    merged[-1].content += part.content
                    merged[-1].content_continues = part.content_continues
                    continue
                copy = context_pb2.ContextMessage()
                copy.CopyFrom(part)
                merged.append(copy)
        assert [m.index for m in merged] == list(range(len(merged)))
        assert not any(m.content_continues for m in merged)
        return merged


async def build(client: Client, episode_id: str, timeout: float = 30, **fields: Any) -> Built:
    request = context_service_pb2.BuildContextRequest(episode_id=episode_id, **fields)
    built = Built()
    async for frame in client.context.BuildContext(request, metadata=client.auth, timeout=timeout):
        built.frames.append(frame)
    return built


async def create_agent(client: Client, *, system_prompt: str = "Be brief.", **memory: object) -> str:
    agent_id = unique("agent")
    config = agent_pb2.MemoryConfig(**memory)  # type: ignore[arg-type]
    agent = agent_pb2.Agent(
        agent_id=agent_id, system_prompt=system_prompt, model="gpt-4", memory_config=config
    )
    await client.agents.CreateAgent(agent_service_pb2.CreateAgentRequest(agent=agent), metadata=client.auth)
    return agent_id


async def get_call(client: Client, model_call_id: str) -> context_pb2.ModelCall:
    request = context_service_pb2.GetModelCallRequest(model_call_id=model_call_id)
    return (await client.context.GetModelCall(request, metadata=client.auth)).model_call


async def list_calls(client: Client, episode_id: str, page_size: int = 100) -> list[context_pb2.ModelCall]:
    calls: list[context_pb2.ModelCall] = []
    token = ""
    while True:
        request = context_service_pb2.ListModelCallsRequest(
            episode_id=episode_id, page_size=page_size, page_token=token
        )
        page = await client.context.ListModelCalls(request, metadata=client.auth)
        calls.extend(page.model_calls)
        token = page.next_page_token
        if not token:
            return calls
