"""`episodic-lab eval-shares`: which split of the budget between "[Knowledge]", "[Known Facts]"
and "[Past Conversations]" lets the model see most of LoCoMo's answers.

Loaded once, on a throwaway server (SQLite, `--embedder`): per conversation one agent (documents
belong to an agent) with user = sample_id, holding the conversation's observations as its
documents (as eval-knowledge loads them) and its sessions as closed, digested episodes (as
eval-recall loads them), memories extracted at close. So all three sources are live at once.

Then for each answerable question (categories 1, 2, 4 with a gold answer) an empty probe
episode of its user, and one BuildContext per setting with the question as user message (not
appended) and a per-request memory_config: a 4k budget, HYBRID recall, the three sections on,
and the split's knowledge/known_facts/recall_budget_percent. Each split of `--splits` is a
setting; at the default split (25/25/50) each source off in turn is one more (what it adds).

Per setting, overall and per conversation: coverage, the share of the gold answer's words in the
three sections' rendered text ([Knowledge] items without their "Source:" lines, the other two
whole), its mean and the share of questions covered at >= 0.5; each section's coverage and tokens
(means). The probe holds no history, so here a larger share costs nothing: in a live episode what
the sections leave goes to the summary and the history tail, which this does not measure."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from episodic.progress import Progress
from episodic_client import message_input
from episodic_client.context import BuiltContext
from episodic_client.v1 import agent_pb2, context_pb2, episode_pb2, knowledge_pb2
from episodic_lab.bench.server_process import running_server
from episodic_lab.evals.coverage import ANSWERABLE, COVERED_AT, coverage, words
from episodic_lab.evals.knowledge_data import Observation, load_knowledge
from episodic_lab.evals.knowledge_metrics import rendered_bodies
from episodic_lab.evals.locomo_data import Question, Session, load
from episodic_lab.evals.shares_flags import DEFAULT_SPLIT, Split
from episodic_lab.knowledge_calls import KnowledgeLab, knowledge_lab, text_document

AGENT_PREFIX = "locomo-shares-"
BUDGET_TOKENS = 4000
SECTIONS = ("knowledge", "known_facts", "past")
SHORT = {"knowledge": "K", "known_facts": "F", "past": "P"}
SHOWN = (knowledge_pb2.KNOWLEDGE_FATE_WHOLE, knowledge_pb2.KNOWLEDGE_FATE_TRIMMED)
TURN_SPACING = timedelta(seconds=30)  # as eval-recall dates its turns
IN_FLIGHT = 3  # questions asked at once: the client and the server each keep a core busy
DIGEST_TIMEOUT_SECONDS = 900.0


@dataclass(frozen=True, slots=True)
class TopK:
    recall: int
    knowledge: int
    memory: int


@dataclass(frozen=True, slots=True)
class Setting:
    """One way of building every question's context: a split, with each source on or off."""

    label: str
    split: Split
    knowledge: bool = True
    known_facts: bool = True
    recall: bool = True

    def memory(self, top_k: TopK) -> agent_pb2.MemoryConfig:
        """The per-request override: every field BuildContext reads here, set explicitly."""
        return agent_pb2.MemoryConfig(
            max_working_memory_tokens=BUDGET_TOKENS,
            recall_mode=agent_pb2.RECALL_MODE_HYBRID if self.recall else agent_pb2.RECALL_MODE_NONE,
            recall_top_k=top_k.recall,
            knowledge=self.knowledge,
            knowledge_top_k=top_k.knowledge,
            known_facts=self.known_facts,
            memory_top_k=top_k.memory,
            knowledge_budget_percent=self.split.knowledge,
            known_facts_budget_percent=self.split.known_facts,
            recall_budget_percent=self.split.recall,
        )


def settings_of(splits: Sequence[Split]) -> list[Setting]:
    """Every split with all sources on, then the default split with each source off in turn."""
    base = DEFAULT_SPLIT.label
    return [
        *(Setting(s.label, s) for s in splits),
        Setting(f"{base} knowledge off", DEFAULT_SPLIT, knowledge=False),
        Setting(f"{base} known facts off", DEFAULT_SPLIT, known_facts=False),
        Setting(f"{base} recall off", DEFAULT_SPLIT, recall=False),
    ]


@dataclass(frozen=True, slots=True)
class Seen:
    """What one context showed of one question's answer."""

    sample_id: str
    question_id: str
    coverage: float  # of the three sections together
    sections: dict[str, float]  # coverage by section
    tokens: dict[str, int]  # tokens by section


def seen_in(q: Question, texts: dict[str, str], tokens: dict[str, int]) -> Seen:
    """The answer words of q found in each section's text, and in all of them together."""
    answer = words(q.answer)
    return Seen(
        sample_id=q.sample_id,
        question_id=q.question_id,
        coverage=coverage(answer, "\n".join(texts.values())),
        sections={name: coverage(answer, texts.get(name, "")) for name in SECTIONS},
        tokens={name: tokens.get(name, 0) for name in SECTIONS},
    )


@dataclass(frozen=True, slots=True)
class Row:
    """The means over some questions of one setting."""

    questions: int
    mean: float
    covered: float  # the share covered at >= COVERED_AT
    sections: dict[str, float]
    tokens: dict[str, float]

    @property
    def total_tokens(self) -> float:
        return sum(self.tokens.values())


def summarize(seen: Sequence[Seen]) -> Row:
    n = max(len(seen), 1)
    return Row(
        questions=len(seen),
        mean=sum(s.coverage for s in seen) / n,
        covered=sum(s.coverage >= COVERED_AT for s in seen) / n,
        sections={name: sum(s.sections[name] for s in seen) / n for name in SECTIONS},
        tokens={name: sum(s.tokens[name] for s in seen) / n for name in SECTIONS},
    )


def of(seen: Sequence[Seen], sample_id: str) -> list[Seen]:
    """The outcomes of one conversation's questions."""
    return [s for s in seen if s.sample_id == sample_id]


def table(results: dict[str, list[Seen]], labels: Sequence[str], reference: str) -> str:
    """Overall: coverage mean and covered share, the questions gained and lost against the
    reference setting, then each section's coverage and tokens."""
    cov = " ".join(f"{'cov ' + SHORT[n]:>6}" for n in SECTIONS)
    tok = " ".join(f"{'tok ' + SHORT[n]:>6}" for n in SECTIONS)
    head = f"{'setting (K/F/P %)':<28} {'n':>4} {'mean':>6} {'>=.5':>6} {'+/-':>7}"
    lines = [f"{head} | {cov} | {tok} {'tok all':>7}"]
    for label in labels:
        r = summarize(results[label])
        gained, lost = changed(results[label], results[reference])
        covs = " ".join(f"{r.sections[n]:>6.3f}" for n in SECTIONS)
        toks = " ".join(f"{r.tokens[n]:>6.0f}" for n in SECTIONS)
        lines.append(
            f"{label:<28} {r.questions:>4} {r.mean:>6.3f} {r.covered:>6.3f} {f'+{gained}/-{lost}':>7} | "
            f"{covs} | {toks} {r.total_tokens:>7.0f}"
        )
    return "\n".join(lines)


def conversation_table(results: dict[str, list[Seen]], labels: Sequence[str], reference: str) -> str:
    """Per conversation: coverage mean and covered share, the covered share's change against the
    reference setting (the default split), and the questions behind it (+gained/-lost), so that a
    win on one conversation, or of a question or two, shows as such."""
    samples = sorted({s.sample_id for seen in results.values() for s in seen})
    head = f"{'setting (K/F/P %)':<28}" + "".join(
        f" | {s + ' n':>11} {'mean':>6} {'>=.5':>6} {'d>=.5':>6} {'+/-':>7}" for s in samples
    )
    lines = [head]
    for label in labels:
        row = f"{label:<28}"
        for sample in samples:
            mine, ref = of(results[label], sample), of(results[reference], sample)
            r, base = summarize(mine), summarize(ref)
            gained, lost = changed(mine, ref)
            row += (
                f" | {r.questions:>11} {r.mean:>6.3f} {r.covered:>6.3f} {r.covered - base.covered:>+6.3f}"
                f" {f'+{gained}/-{lost}':>7}"
            )
        lines.append(row)
    return "\n".join(lines)


def changed(seen: Sequence[Seen], reference: Sequence[Seen]) -> tuple[int, int]:
    """How many questions are covered at >= COVERED_AT in `seen` but not in `reference`, and
    the other way round (paired by question id)."""
    before = {s.question_id: s.coverage >= COVERED_AT for s in reference}
    now = {s.question_id: s.coverage >= COVERED_AT for s in seen}
    gained = sum(1 for q, covered in now.items() if covered and not before.get(q, False))
    lost = sum(1 for q, covered in before.items() if covered and not now.get(q, False))
    return gained, lost


def answerable(questions: Sequence[Question], limit: int = 0) -> list[Question]:
    """The questions coverage can score (a checkable category and a gold answer with content
    words), the first `limit` of each conversation when limit > 0."""
    kept: list[Question] = []
    per_sample: dict[str, int] = {}
    for q in questions:
        if q.category not in ANSWERABLE or not words(q.answer):
            continue
        if limit and per_sample.get(q.sample_id, 0) >= limit:
            continue
        per_sample[q.sample_id] = per_sample.get(q.sample_id, 0) + 1
        kept.append(q)
    return kept


def agent_of(sample_id: str) -> str:
    return AGENT_PREFIX + sample_id


def run_eval_shares(args: argparse.Namespace) -> int:
    sessions, questions = load(args.data)
    observations, _ = load_knowledge(args.data)
    asked = answerable(questions, args.limit)
    top_k = TopK(args.recall_top_k, args.knowledge_top_k, args.memory_top_k)
    settings = settings_of(args.splits)
    print(
        f"eval-shares: {len(asked)} answerable questions, {len(sessions)} sessions, "
        f"{len(observations)} documents; --embedder {args.embedder}; BuildContext on an empty probe "
        f"episode, {BUDGET_TOKENS}-token budget, HYBRID recall top {top_k.recall}, knowledge top "
        f"{top_k.knowledge}, memories top {top_k.memory}; {len(settings)} settings"
    )
    started = time.perf_counter()
    results = asyncio.run(_evaluate(sessions, observations, asked, settings, top_k, args.embedder))
    labels = [s.label for s in settings]
    sweep = labels[: len(args.splits)]
    print("\nsplits, all sources on (coverage of the three sections; K knowledge, F known facts, P past):")
    print(table(results, sweep, DEFAULT_SPLIT.label))
    print(f"\nwhat each source adds (at {DEFAULT_SPLIT.label}):")
    print(table(results, [DEFAULT_SPLIT.label, *labels[len(args.splits) :]], DEFAULT_SPLIT.label))
    print("\nper conversation (d>=.5: covered share minus the default split's; +/-: questions gained/lost):")
    print(conversation_table(results, labels, DEFAULT_SPLIT.label))
    print(f"\nmeasured in {time.perf_counter() - started:.0f} s (load included)")
    if args.json:
        args.json.write_text(json.dumps(_json(args, top_k, results, labels), indent=2) + "\n")
    return 0


async def _evaluate(
    sessions: list[Session],
    observations: list[Observation],
    asked: list[Question],
    settings: Sequence[Setting],
    top_k: TopK,
    embedder: str,
) -> dict[str, list[Seen]]:
    async with loaded_server(sessions, observations, embedder) as lab:
        return await _ask_all(lab, asked, settings, top_k)


@asynccontextmanager
async def loaded_server(
    sessions: Sequence[Session], observations: Sequence[Observation], embedder: str
) -> AsyncIterator[KnowledgeLab]:
    """A throwaway server (SQLite, `--embedder embedder`): one agent per conversation holding its
    observations as documents and its sessions as closed episodes, every digest READY (and so
    every memory extracted); yields the lab's calls to it."""
    with tempfile.TemporaryDirectory(prefix="episodic-eval-shares-") as tmp:
        async with (
            running_server(f"sqlite:///{tmp}/eval.db", Path(tmp), ("--embedder", embedder)) as server,
            knowledge_lab(server.target) as lab,
        ):
            started = time.perf_counter()
            samples = sorted({s.sample_id for s in sessions})
            for sample in samples:
                await lab.client.create_agent(agent_of(sample), model="gpt-4o")
            chunks = await _load_documents(lab, observations)
            await _load_sessions(lab, sessions)
            await _await_digests(lab, samples, len(sessions))
            memories = {sample: await _memories(lab, sample) for sample in samples}
            print(
                f"loaded {len(observations)} documents ({chunks} chunks) and {len(sessions)} digested "
                f"episodes in {time.perf_counter() - started:.0f} s; memories extracted: "
                + ", ".join(f"{k} {v}" for k, v in memories.items())
            )
            yield lab


async def _load_documents(lab: KnowledgeLab, observations: Sequence[Observation]) -> int:
    chunks = 0
    with Progress("documents", len(observations), unit="documents") as bar:
        for sample in sorted({o.sample_id for o in observations}):
            mine = [text_document(o.document_id, o.text) for o in observations if o.sample_id == sample]
            chunks += await lab.create_documents(agent_of(sample), mine)
            bar.advance(len(mine))
    return chunks


async def _load_sessions(lab: KnowledgeLab, sessions: Sequence[Session]) -> None:
    """Each session one episode of its conversation's agent, dated as the data dates it, closed
    (its digest and memory extraction run in the background)."""
    with Progress("sessions", len(sessions), unit="sessions") as bar:
        for s in sessions:
            episode_id = f"{s.sample_id}-{s.session_id}"
            await lab.client.open_episode(
                agent_of(s.sample_id), s.sample_id, episode_id=episode_id, start_time=s.started
            )
            await lab.client.add_messages(episode_id, [_message(s, i) for i in range(len(s.turns))])
            await lab.client.close_episode(episode_id, end_time=_at(s, len(s.turns)))
            bar.advance()


def _message(session: Session, i: int) -> episode_pb2.MessageInput:
    """The turn as eval-recall stores it: the first speaker is the user, each line names its
    speaker."""
    turn = session.turns[i]
    role = "user" if turn.speaker == session.speakers[0] else "assistant"
    return message_input(role, f"{turn.speaker}: {turn.text}", create_time=_at(session, i))


def _at(session: Session, i: int) -> datetime:
    return session.started + TURN_SPACING * i


async def _await_digests(lab: KnowledgeLab, samples: Sequence[str], episodes: int) -> None:
    deadline = time.monotonic() + DIGEST_TIMEOUT_SECONDS
    with Progress("digest", episodes, unit="episodes") as bar:
        while time.monotonic() < deadline:
            pending = 0
            for sample in samples:
                reply = await lab.client.search_episodes(agent_of(sample), sample, mode="recency", top_k=1)
                pending += reply.pending_digests
            bar.update(episodes - pending)
            if not pending:
                return
            await asyncio.sleep(0.5)
    raise TimeoutError(f"digests did not become READY in {DIGEST_TIMEOUT_SECONDS:.0f} s")


async def _memories(lab: KnowledgeLab, sample: str) -> int:
    """How many long-term memories the conversation's episodes left (the [Known Facts] source)."""
    count, token = 0, ""
    while True:
        page = await lab.client.list_memories(agent_of(sample), sample, page_size=100, page_token=token)
        count += len(page.memories)
        token = page.next_page_token
        if not token:
            return count


async def _ask_all(
    lab: KnowledgeLab, asked: Sequence[Question], settings: Sequence[Setting], top_k: TopK
) -> dict[str, list[Seen]]:
    """Every setting for every question, on one probe episode per question (BuildContext without
    append leaves it empty), a few questions at a time."""
    results: dict[str, list[Seen]] = {s.label: [] for s in settings}
    memories = [(s.label, s.memory(top_k)) for s in settings]
    room = asyncio.Semaphore(IN_FLIGHT)

    async def one(q: Question, bar: Progress) -> None:
        async with room:
            probe = (await lab.client.open_episode(agent_of(q.sample_id), q.sample_id)).episode.episode_id
            for label, memory in memories:
                built = await lab.client.build_context(probe, user_message=q.text, memory_config=memory)
                results[label].append(seen_in(q, section_texts(built), section_tokens(built.report)))
                bar.advance()

    with Progress("BuildContext", len(asked) * len(settings), unit="contexts") as bar:
        await asyncio.gather(*(one(q, bar) for q in asked))
    return results


def section_texts(built: BuiltContext) -> dict[str, str]:
    """What coverage reads of each section: the rendered [Knowledge] items (not the header or
    their "Source:" lines, which name document ids), the other two sections' whole text."""
    by_section = {
        context_pb2.CONTEXT_SECTION_KNOWLEDGE: "knowledge",
        context_pb2.CONTEXT_SECTION_KNOWN_FACTS: "known_facts",
        context_pb2.CONTEXT_SECTION_PAST_CONVERSATIONS: "past",
    }
    texts = dict.fromkeys(SECTIONS, "")
    for m in built.messages:
        if m.section in by_section:
            texts[by_section[m.section]] += m.content
    spans = [(k.start_char, k.end_char) for k in built.report.knowledge if k.fate in SHOWN]
    texts["knowledge"] = rendered_bodies(texts["knowledge"], spans)
    return texts


def section_tokens(report: context_pb2.ContextReport) -> dict[str, int]:
    t = report.section_tokens
    return {"knowledge": t.knowledge, "known_facts": t.known_facts, "past": t.past_conversations}


def _json(
    args: argparse.Namespace, top_k: TopK, results: dict[str, list[Seen]], labels: Sequence[str]
) -> object:
    samples = sorted({s.sample_id for seen in results.values() for s in seen})
    return {
        "data": str(args.data),
        "embedder": args.embedder,
        "budget_tokens": BUDGET_TOKENS,
        "top_k": dataclasses.asdict(top_k),
        "settings": {
            label: {
                "overall": dataclasses.asdict(summarize(results[label])),
                **{sample: dataclasses.asdict(summarize(of(results[label], sample))) for sample in samples},
            }
            for label in labels
        },
    }
