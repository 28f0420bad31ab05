"""`episodic-lab eval-recall`: LoCoMo recall through the public gRPC API.

Each session becomes one episode (user = sample_id, its real dates), is closed, and once
every digest is READY each question is asked with SearchEpisodes; recall@1/3/5 and MRR
of the evidence sessions are printed per category and per conversation next to a plain BM25
over the raw session text, ranked within the same conversation. With --chats FILE, the same on
a hand-written set of support, assistant and group chats instead (`recall_chats`)."""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path

from episodic.progress import Progress
from episodic_client import AsyncEpisodicClient, message_input
from episodic_client.v1 import episode_pb2
from episodic_lab.bench.server_process import running_server
from episodic_lab.connect import lab_client
from episodic_lab.evals.bm25 import Bm25
from episodic_lab.evals.locomo_data import Question, Session, load
from episodic_lab.evals.metrics import Report
from episodic_lab.evals.recall_chats import ChatEpisode, chats_bm25, load_chats, load_into

AGENT = "locomo-eval"
TURN_SPACING = timedelta(seconds=30)


def run_eval(args: argparse.Namespace) -> int:
    if args.what_the_model_sees:
        from episodic_lab.evals.context import run_eval_context

        return run_eval_context(args)
    modes = [m for m in args.modes.split(",") if m]
    if args.chats is not None:
        return _run_chats(args, modes)
    sessions, questions = load(args.data)
    report, conversations = Report(), Report()
    asyncio.run(_evaluate(sessions, questions, modes, args.embedder, report, conversations))
    report_bm25(report, sessions, questions, conversations)
    print(report.table())
    print("per conversation:")
    print(conversations.table())
    print(report.latencies())
    return _gated(report, modes, args)


def _run_chats(args: argparse.Namespace, modes: list[str]) -> int:
    path: Path = args.chats
    episodes, questions = load_chats(path)
    report = Report()
    asyncio.run(_evaluate_chats(episodes, questions, modes, args.embedder, report))
    chats_bm25(report, episodes, questions)
    users = len({e.user for e in episodes})
    print(f"chats: {len(episodes)} episodes of {users} users, {len(questions)} questions ({path.name})")
    print(report.table())
    print(report.latencies())
    return _gated(report, modes, args)


def _gated(report: Report, modes: list[str], args: argparse.Namespace) -> int:
    """1 when --gate names a mode that does not beat bm25, or falls below --floor-r5/--floor-mrr."""
    beaten = _verdict(report, modes)
    if not args.gate:
        return 0
    if args.gate not in beaten:
        return 1
    figures = report.overall(args.gate)
    low = [
        f"{name} {mine:.3f} < {floor}"
        for name, mine, floor in (("R@5", figures[2], args.floor_r5), ("MRR", figures[3], args.floor_mrr))
        if mine < floor
    ]
    if low:
        print(f"{args.gate} below its floor: {', '.join(low)}")
    return 1 if low else 0


async def _evaluate(
    sessions: list[Session],
    questions: list[Question],
    modes: list[str],
    embedder: str,
    report: Report,
    conversations: Report,
) -> None:
    async with loaded_server(sessions, embedder) as client:
        for mode in modes:
            await _ask(client, questions, mode, report, conversations)


async def _evaluate_chats(
    episodes: list[ChatEpisode], questions: list[Question], modes: list[str], embedder: str, report: Report
) -> None:
    async with throwaway_server(embedder) as client:
        await load_into(client, AGENT, episodes)
        await _await_digests(client, {e.user for e in episodes}, len(episodes))
        for mode in modes:
            await _ask(client, questions, mode, report)


@asynccontextmanager
async def throwaway_server(embedder: str) -> AsyncIterator[AsyncEpisodicClient]:
    """An empty server subprocess (SQLite in a temporary directory, `--embedder embedder`);
    yields a client to it."""
    with tempfile.TemporaryDirectory(prefix="episodic-eval-") as tmp:
        async with (
            running_server(f"sqlite:///{tmp}/eval.db", Path(tmp), ("--embedder", embedder)) as server,
            lab_client(server.target) as client,
        ):
            yield client


@asynccontextmanager
async def loaded_server(sessions: list[Session], embedder: str) -> AsyncIterator[AsyncEpisodicClient]:
    """A throwaway server holding every session as a closed, digested episode of agent AGENT
    and user sample_id; yields a client to it."""
    async with throwaway_server(embedder) as client:
        started = time.perf_counter()
        await _load(client, sessions)
        print(f"loaded {len(sessions)} episodes and digested them in {time.perf_counter() - started:.1f} s")
        yield client


async def _load(client: AsyncEpisodicClient, sessions: list[Session]) -> None:
    await client.create_agent(AGENT, model="gpt-4o")
    with Progress("import", len(sessions), unit="sessions") as bar:
        for session in sessions:
            await _import(client, session)
            bar.advance()
    await _await_digests(client, {s.sample_id for s in sessions}, len(sessions))


async def _import(client: AsyncEpisodicClient, session: Session) -> None:
    episode_id = f"{session.sample_id}-{session.session_id}"
    await client.open_episode(AGENT, session.sample_id, episode_id=episode_id, start_time=session.started)
    await client.add_messages(episode_id, [_message(session, i) for i in range(len(session.turns))])
    end = session.started + TURN_SPACING * len(session.turns)
    await client.close_episode(episode_id, end_time=end)


def _message(session: Session, i: int) -> episode_pb2.MessageInput:
    turn = session.turns[i]
    role = "user" if turn.speaker == session.speakers[0] else "assistant"
    when = session.started + TURN_SPACING * i
    return message_input(role, f"{turn.speaker}: {turn.text}", create_time=when)


async def _await_digests(
    client: AsyncEpisodicClient, users: set[str], episodes: int, timeout: float = 600
) -> None:
    deadline = time.monotonic() + timeout
    with Progress("digest", episodes, unit="episodes") as bar:
        while time.monotonic() < deadline:
            pending = 0
            for user in users:
                pending += (
                    await client.search_episodes(AGENT, user, mode="recency", top_k=1)
                ).pending_digests
            bar.update(episodes - pending)
            if not pending:
                return
            await asyncio.sleep(0.2)
    raise TimeoutError("digests did not become READY in time")


async def _ask(
    client: AsyncEpisodicClient,
    questions: list[Question],
    mode: str,
    report: Report,
    conversations: Report | None = None,
) -> None:
    """`mode` is a search mode's short name (recency, semantic, hybrid), as the client takes it;
    `conversations` also gets each question's figures, under its conversation."""
    with Progress(f"ask ({mode})", len(questions), unit="questions") as bar:
        for q in questions:
            started = time.perf_counter()
            reply = await client.search_episodes(AGENT, q.sample_id, q.text, mode=mode, top_k=10)
            report.timed(mode, time.perf_counter() - started)
            ranked = [s.episode_id.removeprefix(f"{q.sample_id}-") for s in reply.snippets]
            report.add(mode, q.category, ranked, q.evidence)
            if conversations is not None:
                conversations.add(mode, q.sample_id, ranked, q.evidence)
            bar.advance()


def report_bm25(
    report: Report,
    sessions: Sequence[Session],
    questions: Sequence[Question],
    conversations: Report | None = None,
) -> None:
    by_sample: dict[str, list[Session]] = {}
    for s in sessions:
        by_sample.setdefault(s.sample_id, []).append(s)
    indexes = {k: Bm25(["\n".join(s.lines()) for s in v]) for k, v in by_sample.items()}
    for q in questions:
        started = time.perf_counter()
        scores = indexes[q.sample_id].scores(q.text)
        report.timed("bm25", time.perf_counter() - started)
        order = sorted(range(len(scores)), key=lambda i: -scores[i])
        ranked = [by_sample[q.sample_id][i].session_id for i in order]
        report.add("bm25", q.category, ranked, q.evidence)
        if conversations is not None:
            conversations.add("bm25", q.sample_id, ranked, q.evidence)


def _verdict(report: Report, modes: list[str]) -> set[str]:
    """Prints each mode against bm25; returns the modes that beat it on R@5 and MRR."""
    base = report.overall("bm25")
    beaten = set()
    for mode in (m for m in modes if m != "recency"):
        mine = report.overall(mode)
        beats = mine[2] > base[2] and mine[3] > base[3]
        verdict = "beats" if beats else "does NOT beat"
        figures = f"R@5 {mine[2]:.3f} vs {base[2]:.3f}, MRR {mine[3]:.3f} vs {base[3]:.3f}"
        print(f"{mode} vs bm25: {figures}: {verdict} bm25")
        beaten |= {mode} if beats else set()
    return beaten
