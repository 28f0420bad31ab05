"""Quickstart: create an agent, log a short conversation, read it back, build the context of
the next model call, close the episode.

    python quickstart.py [ADDRESS [API_KEY]]

ADDRESS defaults to $EPISODIC_ADDRESS or 127.0.0.1:50051; API_KEY to $EPISODIC_API_KEY or
none at all, which a server started with `episodic serve --insecure-dev` accepts."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import textwrap

from episodic_client import AlreadyExistsError, AsyncEpisodicClient
from episodic_client.v1 import context_pb2, episode_pb2

AGENT_ID = "hr-assistant"  # the README's agent: created here if the grpcurl step was skipped


async def main(address: str, api_key: str | None) -> None:
    async with AsyncEpisodicClient(address, api_key=api_key) as client:
        with contextlib.suppress(AlreadyExistsError):  # created by an earlier run
            await client.create_agent(
                AGENT_ID, system_prompt="You are a helpful HR assistant.", model="gpt-4o"
            )

        episode = (await client.open_episode(AGENT_ID, "user-42", metadata={"channel": "cli"})).episode
        print(f"opened episode {episode.episode_id}")
        await client.add_message(episode.episode_id, "user", "How many vacation days do I have?")
        await client.add_message(episode.episode_id, "assistant", "25 days a year.")

        async for message in client.iter_messages(episode.episode_id):  # newest first
            role = episode_pb2.Role.Name(message.role)
            print(f"  #{message.seq} {role:<14} {message.token_count:>3} tokens  {message.content}")

        built = await client.build_context(episode.episode_id, user_message="And sick days?")
        print(f"context of the next model call ({built.report.total_tokens} tokens):")
        for rendered in built.messages:
            role = episode_pb2.Role.Name(rendered.role)
            section = context_pb2.ContextSection.Name(rendered.section)
            print(f"  {role:<14} {section:<34} {textwrap.shorten(rendered.content, 50)}")

        closed = (await client.close_episode(episode.episode_id, note="quickstart done")).episode
        print(f"closed: {closed.message_count} messages, {closed.token_count} tokens")


if __name__ == "__main__":
    args = sys.argv[1:]
    address = args[0] if args else os.environ.get("EPISODIC_ADDRESS", "127.0.0.1:50051")
    api_key = args[1] if len(args) > 1 else os.environ.get("EPISODIC_API_KEY") or None
    asyncio.run(main(address, api_key))
