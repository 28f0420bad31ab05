"""LangGraph with Episodic as its long-term store: a graph whose nodes get the store
injected keeps what the user says in the user's namespace; a later thread (a new session)
of the same user finds it by meaning and hands it to the model.

    pip install "./clients/python[langgraph]"
    python langgraph.py [ADDRESS [API_KEY]]

ADDRESS defaults to $EPISODIC_ADDRESS or 127.0.0.1:50051; API_KEY to $EPISODIC_API_KEY or
none at all, which a server started with `episodic serve --insecure-dev` accepts. The model
is scripted (it answers "noted" and records its prompts), so no model API is called. Exits 0
only if what the user said in the first session reached the model in the second."""

# ruff: noqa: E402  (the imports follow the sys.path fix below)
from __future__ import annotations

import sys
from pathlib import Path

# This file is named langgraph.py: run as a script, its folder comes first on sys.path and
# would shadow the langgraph package, so it is dropped before LangGraph is imported.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]

import contextlib
import os
import uuid
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore
from pydantic import Field
from typing_extensions import TypedDict

from episodic_client import AlreadyExistsError, EpisodicClient
from episodic_client.integrations.langgraph import EpisodicStore

AGENT_ID = "langgraph-example"
USER_ID = "user-42"
FIRST_SESSION = "My cat is called Zanzibar and I am allergic to peanuts."
SECOND_SESSION = "What is my cat called?"


class ScriptedModel(BaseChatModel):
    """Stands in for a chat model: answers "noted" and keeps every prompt it was sent."""

    prompts: list[list[BaseMessage]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.prompts.append(list(messages))
        return ChatResult(generations=[ChatGeneration(message=AIMessage("noted"))])


class Turn(TypedDict, total=False):
    said: str
    answer: str


def build_graph(model: BaseChatModel, store: BaseStore) -> Any:
    def remember(state: Turn, config: RunnableConfig, *, store: BaseStore) -> Turn:
        """A statement (not a question) goes to the user's memories."""
        if not state["said"].rstrip().endswith("?"):
            user_id = config["configurable"]["user_id"]
            store.put((user_id, "memories"), uuid.uuid4().hex, {"text": state["said"]})
        return {}

    def respond(state: Turn, config: RunnableConfig, *, store: BaseStore) -> Turn:
        """The memories that match what was said go to the model as instructions."""
        user_id = config["configurable"]["user_id"]
        found = store.search((user_id, "memories"), query=state["said"], limit=3)
        known = "\n".join(f"- {hit.value['text']}" for hit in found) or "- nothing yet"
        prompt = [SystemMessage(f"What you know about the user:\n{known}"), HumanMessage(state["said"])]
        return {"answer": str(model.invoke(prompt).content)}

    graph = StateGraph(Turn)
    graph.add_node("remember", remember)
    graph.add_node("respond", respond)
    graph.add_edge(START, "remember")
    graph.add_edge("remember", "respond")
    graph.add_edge("respond", END)
    return graph.compile(checkpointer=InMemorySaver(), store=store)


def main(address: str, api_key: str | None) -> int:
    model = ScriptedModel(prompts=[])
    with EpisodicClient(address, api_key=api_key) as client:
        with contextlib.suppress(AlreadyExistsError):  # created by an earlier run
            client.create_agent(AGENT_ID, system_prompt="You are a helpful assistant.")
        graph = build_graph(model, EpisodicStore(client, AGENT_ID))
        for session, said in ((uuid.uuid4().hex, FIRST_SESSION), (uuid.uuid4().hex, SECOND_SESSION)):
            config = {"configurable": {"thread_id": session, "user_id": USER_ID}}
            graph.invoke({"said": said}, config)
            print(f"session {session[:8]}: the user said {said!r}")
    print("in the second session the model received:")
    second = model.prompts[-1]
    for message in second:
        print(f"  [{message.type}] {message.content}")
    reached = any(FIRST_SESSION in str(m.content) for m in second[:-1])
    print("what the user said in the first session reached the model" if reached else "it did not")
    return 0 if reached else 1


if __name__ == "__main__":
    args = sys.argv[1:]
    address = args[0] if args else os.environ.get("EPISODIC_ADDRESS", "127.0.0.1:50051")
    api_key = args[1] if len(args) > 1 else os.environ.get("EPISODIC_API_KEY") or None
    sys.exit(main(address, api_key))
