"""The live-episode case of issue 42, against a server you started: "My cat is called
Zanzibar", thirty turns about a trip at a 250-token budget, then "Who will look after my cat
while I'm away?" — prints what the model is shown and the report's sections.

    episodic serve --insecure-dev --migrate-on-start --address 127.0.0.1:50071 &
    python scripts/zanzibar.py --address 127.0.0.1:50071
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import uuid
from pathlib import Path

from episodic_client import AsyncEpisodicClient
from episodic_client.v1 import agent_pb2, context_pb2, episode_pb2

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.e2e.context_helpers import TRIP

QUESTION = "Who will look after my cat while I'm away?"


async def run(address: str, turns: int, budget: int) -> None:
    async with AsyncEpisodicClient(address) as client:
        agent_id = f"zanzibar-{uuid.uuid4().hex[:8]}"
        config = agent_pb2.MemoryConfig(max_working_memory_tokens=budget)
        await client.create_agent(agent_id, memory_config=config)
        episode = (await client.open_episode(agent_id, user_id="u-1")).episode.episode_id
        said = [("My cat is called Zanzibar.", "What a grand name for a cat!")]
        said += [TRIP[i % len(TRIP)] for i in range(turns)]
        for user, reply in said:
            await client.build_context(episode, user_message=user, append_user_message=True)
            await client.add_message(episode, episode_pb2.ROLE_ASSISTANT, reply)
        built = await client.build_context(episode, user_message=QUESTION)
        for message in built.messages:
            section = context_pb2.ContextSection.Name(message.section).removeprefix("CONTEXT_SECTION_")
            print(f"--- {section} ({message.token_count} tokens)\n{message.content}")
        report = built.report
        print(f"\nbudget {report.budget_tokens}, total {report.total_tokens}", end="")
        print(f", summary to seq {report.summary_to_seq}")
        for passage in report.earlier_passages:
            fate = context_pb2.PassageFate.Name(passage.fate).removeprefix("PASSAGE_FATE_")
            print(f"earlier passage seqs {list(passage.seqs)}: {fate}")


def main() -> None:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=raw)
    parser.add_argument("--address", default="127.0.0.1:50051")
    parser.add_argument("--turns", type=int, default=30)
    parser.add_argument("--budget", type=int, default=250)
    args = parser.parse_args()
    asyncio.run(run(args.address, args.turns, args.budget))


if __name__ == "__main__":
    main()
