"""LangChain's chat history kept in an Episodic episode (clients/python's [langchain] extra),
against a live server and the real langchain-core: messages round-trip with their tool calls
and ids, a retried append adds nothing, clear starts a new episode, what cannot be stored is
refused by name, and a RunnableWithMessageHistory chain shows the model the earlier turn."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

import pytest
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables.history import RunnableWithMessageHistory
from pydantic import Field

from episodic_client import EpisodicClient
from episodic_client.integrations.langchain import EpisodicChatMessageHistory
from episodic_client.v1 import episode_pb2
from tests.conftest import unique
from tests.server_harness import KEY_A, RunningServer

T = TypeVar("T")


@pytest.fixture
def database_url(sqlite_url: str) -> str:
    """One backend: what these tests check is the same over either store (the stores are
    held to one behaviour on both by tests/contracts and tests/integration)."""
    return sqlite_url


async def in_thread(server: RunningServer, work: Callable[[EpisodicClient, str], T]) -> T:
    """Runs `work` with a sync client and a new agent off the loop (the server runs on it)."""

    def run() -> T:
        with EpisodicClient(server.address, api_key=KEY_A, timeout=10.0) as client:
            agent_id = client.create_agent(unique("agent")).agent.agent_id
            return work(client, agent_id)

    return await asyncio.to_thread(run)


def conversation() -> list[BaseMessage]:
    call = {
        "name": "weather",
        "args": {"city": "Zürich", "days": 2, "nested": {"x": [1, 2.5]}},
        "id": "call_1",
    }
    other = {"name": "radar", "args": {}, "id": "call_2"}
    return [
        SystemMessage("Answer briefly.", id="m-1"),
        HumanMessage([{"type": "text", "text": "Weather in "}, "Zürich? 🌧"], id="m-2"),
        AIMessage("", id="m-3", tool_calls=[call, other]),
        ToolMessage('{"temp": 3}', id="m-4", tool_call_id="call_1"),
        ToolMessage("timeout", id="m-5", tool_call_id="call_2", status="error"),
        AIMessage("3 °C and rain.", id="m-6"),
    ]


async def test_messages_round_trip_with_tool_calls_ids_and_status(server: RunningServer) -> None:
    def work(client: EpisodicClient, agent_id: str) -> tuple[list[BaseMessage], list[BaseMessage], int]:
        history = EpisodicChatMessageHistory(client, agent_id, "mary")
        history.add_messages(conversation())
        history.add_messages(conversation()[:2])  # a retry: the ids are its client_message_ids
        again = EpisodicChatMessageHistory(client, agent_id, "mary", episode_id=history.episode_id)
        log = list(client.iter_messages(history.episode_id))
        return history.messages, again.messages, len(log)

    read, reread, logged = await in_thread(server, work)

    assert logged == 6 and read == reread
    system, human, asked, answered, failed, final = read
    assert isinstance(system, SystemMessage) and system.content == "Answer briefly." and system.id == "m-1"
    assert isinstance(human, HumanMessage) and human.content == "Weather in Zürich? 🌧"
    assert isinstance(asked, AIMessage) and asked.tool_calls == conversation()[2].tool_calls  # type: ignore[attr-defined]
    assert (
        isinstance(answered, ToolMessage)
        and answered.tool_call_id == "call_1"
        and answered.status == "success"
    )
    assert isinstance(failed, ToolMessage) and failed.status == "error" and failed.content == "timeout"
    assert isinstance(final, AIMessage) and final.content == "3 °C and rain." and final.id == "m-6"


async def test_clear_closes_the_episode_and_what_cannot_be_stored_is_refused_by_name(
    server: RunningServer,
) -> None:
    def work(client: EpisodicClient, agent_id: str) -> tuple[str, int, Any, list[BaseMessage], str]:
        history = EpisodicChatMessageHistory(client, agent_id, "mary")
        first = history.episode_id
        history.add_messages([HumanMessage("I'm vegetarian.")])
        history.clear()
        closed = client.get_episode(first).episode.state
        image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
        with pytest.raises(ValueError, match="message 1: a content part of type 'image_url'") as refused:
            history.add_messages([HumanMessage("look"), HumanMessage([image])])
        return first, closed, refused.value, history.messages, history.episode_id

    first, closed, _, after, current = await in_thread(server, work)

    assert closed == episode_pb2.Episode.STATE_CLOSED
    assert current != first and after == [], (
        "a cleared history starts empty, and the refused batch wrote nothing"
    )


class RecordingModel(BaseChatModel):
    """A chat model that answers "noted" and keeps what it was sent."""

    seen: list[list[BaseMessage]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "recording"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.seen.append(list(messages))
        return ChatResult(generations=[ChatGeneration(message=AIMessage(f"noted {len(self.seen)}"))])


# LangChain 1.x deprecates RunnableWithMessageHistory (for LangGraph's persistence) but ships it:
# it is still what drives a BaseChatMessageHistory.
@pytest.mark.filterwarnings("ignore::langchain_core._api.deprecation.LangChainDeprecationWarning")
async def test_a_chain_with_message_history_shows_the_model_the_earlier_turn(server: RunningServer) -> None:
    model = RecordingModel(seen=[])
    prompt = ChatPromptTemplate.from_messages([MessagesPlaceholder("history"), ("human", "{input}")])

    def work(client: EpisodicClient, agent_id: str) -> list[BaseMessage]:
        histories: dict[str, EpisodicChatMessageHistory] = {}

        def history_of(session_id: str) -> EpisodicChatMessageHistory:
            if session_id not in histories:
                histories[session_id] = EpisodicChatMessageHistory(client, agent_id, "mary")
            return histories[session_id]

        chain = RunnableWithMessageHistory(
            prompt | model, history_of, input_messages_key="input", history_messages_key="history"
        )
        config = {"configurable": {"session_id": "s1"}}
        chain.invoke({"input": "My cat is called Miso."}, config=config)  # type: ignore[arg-type]
        chain.invoke({"input": "What is my cat called?"}, config=config)  # type: ignore[arg-type]
        return histories["s1"].messages

    stored = await in_thread(server, work)

    second = model.seen[1]
    assert [type(m).__name__ for m in second] == ["HumanMessage", "AIMessage", "HumanMessage"]
    assert second[0].content == "My cat is called Miso." and second[1].content == "noted 1"
    assert [m.content for m in stored] == [
        "My cat is called Miso.",
        "noted 1",
        "What is my cat called?",
        "noted 2",
    ]
