"""The OpenAI Agents SDK with Episodic sessions: two sessions of one user, the second one
remembering the first.

    pip install "./clients/python[openai-agents]"
    python openai_agents.py [ADDRESS [API_KEY]]

ADDRESS defaults to $EPISODIC_ADDRESS or 127.0.0.1:50051; API_KEY to $EPISODIC_API_KEY or
none at all, which a server started with `episodic serve --insecure-dev` accepts.

No model API is called: a scripted model (the SDK's `agents.testing.ScriptedModel`) answers
from what it receives, and the SDK's tracing is off (`set_tracing_disabled`), so nothing leaves
the machine. Session 1 keeps the raw conversation (`EpisodicSession`), with a tool call;
`clear_session` closes its episode and waits for its digest, so it can be recalled at once.
Session 2 (`EpisodicContextSession`) gets Episodic's budgeted context, where the first
session is recalled. Prints what the model received in session 2; exits 0 only if something
the user said in session 1 reached it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import uuid

from agents import Agent, Runner, function_tool, set_tracing_disabled
from agents.testing import ModelCall, ModelStep, ScriptedModel, assistant_message, function_call

from episodic_client import AlreadyExistsError, AsyncEpisodicClient
from episodic_client.integrations.openai_agents import EpisodicContextSession, EpisodicSession

AGENT_ID = "openai-agents-example"
REMEMBERED = "Miso"  # what the user says in session 1 and the model should know in session 2


@function_tool
def weather(city: str) -> str:
    """Tomorrow's forecast for a city."""
    return f"Light rain in {city} tomorrow, 12 °C."


def answer_from_context(call: ModelCall) -> ModelStep:
    """The scripted model of session 2: it knows the cat's name only if it was given it."""
    seen = json.dumps(call.input, ensure_ascii=False)
    text = f"Your cat is called {REMEMBERED}." if REMEMBERED in seen else "I don't know your cat's name."
    return ModelStep(output=[assistant_message(text, item_id="msg_3")])


async def main(address: str, api_key: str | None) -> int:
    user_id = f"user-{uuid.uuid4().hex[:8]}"  # a new user each run: only this run is recalled
    async with AsyncEpisodicClient(address, api_key=api_key, timeout=30.0) as client:
        with contextlib.suppress(AlreadyExistsError):  # created by an earlier run
            await client.create_agent(AGENT_ID, system_prompt="You are a friendly assistant.")

        first = EpisodicSession(f"{user_id}-chat-1", client, AGENT_ID, user_id)
        model = ScriptedModel(
            [
                [function_call("weather", {"city": "Zürich"}, call_id="call_1")],
                [assistant_message("Light rain tomorrow, take an umbrella.", item_id="msg_1")],
            ]
        )
        agent = Agent(name="assistant", model=model, tools=[weather])
        said = f"My cat {REMEMBERED} hates rain. What's the weather in Zürich tomorrow?"
        result = await Runner.run(agent, said, session=first)
        print(f"session 1 ({first.episode_id}): {said!r} -> {result.final_output!r}")
        await first.clear_session()  # closes the episode, once its digest is made: recallable now

        second = EpisodicContextSession(f"{user_id}-chat-2", client, AGENT_ID, user_id)
        model = ScriptedModel([ModelStep.respond(answer_from_context)])
        agent = Agent(name="assistant", model=model, tools=[weather])
        asked = "What is my cat called?"
        result = await Runner.run(agent, asked, session=second)
        print(f"session 2 ({second.episode_id}): {asked!r} -> {result.final_output!r}")

    received = model.calls[0].input
    print("the model received in session 2:")
    print(json.dumps(received, ensure_ascii=False, indent=2))
    return 0 if REMEMBERED in json.dumps(received, ensure_ascii=False) else 1


if __name__ == "__main__":
    set_tracing_disabled(True)  # the SDK exports traces to OpenAI by default (needs OPENAI_API_KEY)
    args = sys.argv[1:]
    address = args[0] if args else os.environ.get("EPISODIC_ADDRESS", "127.0.0.1:50051")
    api_key = args[1] if len(args) > 1 else os.environ.get("EPISODIC_API_KEY") or None
    sys.exit(asyncio.run(main(address, api_key)))
