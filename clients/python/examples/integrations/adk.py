"""Google ADK with Episodic: an ADK agent keeps its sessions in Episodic and, in a later
session, is shown what the user said in an earlier one (ADK's preload_memory tool, served by
EpisodicMemoryService). The model is scripted, so this runs without any model API.

    pip install "./clients/python[adk]"
    python adk.py [ADDRESS [API_KEY]]

ADDRESS defaults to $EPISODIC_ADDRESS or 127.0.0.1:50051; API_KEY to $EPISODIC_API_KEY or
none at all (a server started with `episodic serve --insecure-dev`). Exits 0 when something
the user said in the first session reached the model in the second, else 1."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import uuid
from collections.abc import AsyncGenerator

from google.adk.agents import LlmAgent
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.tools.preload_memory_tool import PreloadMemoryTool
from google.genai import types
from pydantic import Field

from episodic_client import AlreadyExistsError, AsyncEpisodicClient
from episodic_client.integrations.adk import EpisodicMemoryService, EpisodicSessionService

APP = "adk-example"  # the Episodic agent the ADK app runs as: created here on the first run
FIRST_SESSION = ["My cat is called Zanzibar.", "She sleeps on the piano."]
QUESTION = "What is my cat called?"


class ScriptedModel(BaseLlm):
    """Answers "Noted." and keeps every request, to show what the model was sent."""

    requests: list[LlmRequest] = Field(default_factory=list)

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        self.requests.append(llm_request.model_copy(deep=True))
        usage = types.GenerateContentResponseUsageMetadata(prompt_token_count=1, candidates_token_count=1)
        reply = types.Content(role="model", parts=[types.Part(text="Noted.")])
        yield LlmResponse(content=reply, usage_metadata=usage)


def text_of(request: LlmRequest) -> str:
    return "\n".join(part.text for content in request.contents for part in content.parts or [] if part.text)


async def talk(runner: Runner, user_id: str, session_id: str, text: str) -> None:
    message = types.Content(role="user", parts=[types.Part(text=text)])
    async for event in runner.run_async(user_id=user_id, session_id=session_id, new_message=message):
        if event.content and event.content.parts and event.content.parts[0].text:
            print(f"  {event.author}: {event.content.parts[0].text}")


async def main(address: str, api_key: str | None) -> int:
    async with AsyncEpisodicClient(address, api_key=api_key, timeout=30) as client:
        with contextlib.suppress(AlreadyExistsError):  # created by an earlier run
            await client.create_agent(APP, system_prompt="You are a helpful assistant.")
        sessions, memory = EpisodicSessionService(client), EpisodicMemoryService(client)
        model = ScriptedModel(model="scripted")
        agent = LlmAgent(name="assistant", model=model, tools=[PreloadMemoryTool()])
        runner = Runner(app_name=APP, agent=agent, session_service=sessions, memory_service=memory)
        user_id = f"user-{uuid.uuid4().hex[:8]}"  # a new user each run: only this run's words count

        first = await sessions.create_session(app_name=APP, user_id=user_id)
        print(f"session 1 ({first.id}):")
        for text in FIRST_SESSION:
            await talk(runner, user_id, first.id, text)
        done = await sessions.get_session(app_name=APP, user_id=user_id, session_id=first.id)
        assert done is not None
        await memory.add_session_to_memory(done)  # closes the episode: digested, memories extracted

        second = await sessions.create_session(app_name=APP, user_id=user_id)
        print(f"session 2 ({second.id}):")
        await talk(runner, user_id, second.id, QUESTION)
        received = text_of(model.requests[-1])
        print("the model received:")
        print("\n".join(f"  | {line}" for line in received.splitlines()))
        recalled = [line for line in FIRST_SESSION if line.rstrip(".").split()[-1] in received]
        print(
            "recalled from session 1:" if recalled else "nothing from session 1 reached the model", *recalled
        )
        return 0 if recalled else 1


if __name__ == "__main__":
    address = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("EPISODIC_ADDRESS", "127.0.0.1:50051")
    api_key = sys.argv[2] if len(sys.argv) > 2 else os.environ.get("EPISODIC_API_KEY") or None
    sys.exit(asyncio.run(main(address, api_key)))
