"""`episodic-lab eval-known-facts`: what BuildContext renders under "[Known Facts]", on a
hand-written labelled set (`known_facts_data.jsonl`, not LoCoMo text).

Each line is one user: memories the client wrote (CreateMemories, EAGER, first or third
person), episodes whose user messages state facts (closed and digested on the server, so
their memories come from the real extractor; each labelled by a folded substring of its
text), groups of labelled memories that say the same thing ("same"), and questions whose
answer is one memory (its id, with its duplicates: rendering any of them answers). Many
questions share no word with their answer ("What should I cook tonight?" -> vegetarian).

Through the public API on a throwaway server (SQLite, `--embedder`): per question,
BuildContext on a fresh probe episode of the user with the question as user message (not
appended), known facts on with the defaults, recall and knowledge off. Read from the report's
rendered memories (and checked against the section's text). Printed, per user and overall:

- answered: the share of questions whose gold memory (or a duplicate of it) was rendered;
- precision: rendered facts that are gold / rendered facts (0 when nothing is rendered);
- duplicates: rendered facts per context that repeat a labelled group already rendered;
- mrr: 1 / the position of the first gold fact rendered (0 when none), averaged;
- facts and tokens: rendered facts and section tokens per context.

`--gate` exits 1 below `--floor-answered`, `--floor-precision` or `--floor-mrr`, or above
`--ceiling-duplicates`."""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from episodic_client import AsyncEpisodicClient, memory_input
from episodic_client.v1 import agent_pb2, context_pb2
from episodic_lab.bench.server_process import running_server
from episodic_lab.connect import CALL_TIMEOUT_SECONDS

AGENT = "known-facts-eval"
BUDGET_TOKENS = 4000
MEMORY = agent_pb2.MemoryConfig(
    max_working_memory_tokens=BUDGET_TOKENS,
    known_facts=True,
    recall_mode=agent_pb2.RECALL_MODE_NONE,
    knowledge=False,
)
KNOWN_FACTS = context_pb2.CONTEXT_SECTION_KNOWN_FACTS
DIGEST_TIMEOUT_SECONDS = 60.0


@dataclass(frozen=True, slots=True)
class Question:
    text: str
    gold: frozenset[str]


@dataclass(frozen=True, slots=True)
class User:
    user_id: str
    client: tuple[tuple[str, str, str], ...]  # (label, text, kind)
    episodes: tuple[tuple[str, ...], ...]  # user messages of each episode
    extracted: tuple[tuple[str, str], ...]  # (label, folded substring of the extracted text)
    same: tuple[frozenset[str], ...]
    questions: tuple[Question, ...]

    def group_of(self, label: str) -> str:
        """The labelled group a memory belongs to (itself when it has no duplicate)."""
        for group in self.same:
            if label in group:
                return min(group)
        return label


def load(path: Path) -> list[User]:
    users = []
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        users.append(
            User(
                user_id=row["user"],
                client=tuple((m["id"], m["text"], m.get("kind", "fact")) for m in row["client"]),
                episodes=tuple(tuple(e) for e in row["episodes"]),
                extracted=tuple((m["id"], m["match"].casefold()) for m in row["extracted"]),
                same=tuple(frozenset(group) for group in row["same"]),
                questions=tuple(Question(q["text"], frozenset(q["gold"])) for q in row["questions"]),
            )
        )
    return users


@dataclass(frozen=True, slots=True)
class Seen:
    """What one BuildContext rendered, as labels ("" for a memory nobody labelled)."""

    rendered: tuple[str, ...]
    tokens: int


@dataclass(slots=True)
class Tally:
    questions: int = 0
    answered: int = 0
    rendered: int = 0
    gold_rendered: int = 0
    duplicates: int = 0
    tokens: int = 0
    reciprocal_ranks: float = 0.0

    def add(self, user: User, q: Question, seen: Seen) -> None:
        self.questions += 1
        self.answered += bool(q.gold & set(seen.rendered))
        self.rendered += len(seen.rendered)
        self.gold_rendered += sum(1 for label in seen.rendered if label in q.gold)
        self.duplicates += duplicates(user, seen.rendered)
        self.tokens += seen.tokens
        first = next((i for i, label in enumerate(seen.rendered, start=1) if label in q.gold), 0)
        self.reciprocal_ranks += 1 / first if first else 0.0

    def merge(self, other: Tally) -> None:
        for name in (
            "questions",
            "answered",
            "rendered",
            "gold_rendered",
            "duplicates",
            "tokens",
            "reciprocal_ranks",
        ):
            setattr(self, name, getattr(self, name) + getattr(other, name))

    @property
    def answered_rate(self) -> float:
        return self.answered / self.questions if self.questions else 0.0

    @property
    def precision(self) -> float:
        return self.gold_rendered / self.rendered if self.rendered else 0.0

    @property
    def mrr(self) -> float:
        return self.reciprocal_ranks / self.questions if self.questions else 0.0

    def per_context(self, value: int) -> float:
        return value / self.questions if self.questions else 0.0


def duplicates(user: User, rendered: Sequence[str]) -> int:
    """Rendered facts whose labelled group was already rendered in the same context."""
    seen: set[str] = set()
    repeats = 0
    for label in rendered:
        if not label:
            continue
        group = user.group_of(label)
        repeats += group in seen
        seen.add(group)
    return repeats


@dataclass(slots=True)
class Report:
    users: dict[str, Tally] = field(default_factory=dict)
    unlabelled: int = 0  # extracted memories no label matched
    missing: list[str] = field(default_factory=list)  # labels of extracted memories not found

    def overall(self) -> Tally:
        total = Tally()
        for tally in self.users.values():
            total.merge(tally)
        return total

    def table(self) -> str:
        rows = [f"{'user':<10} {'questions':>9} {'answered':>9} {'precision':>9} {'dups/ctx':>9} "
                f"{'mrr':>6} {'facts/ctx':>9} {'tokens/ctx':>10}"]  # fmt: skip
        for name, t in [*self.users.items(), ("overall", self.overall())]:
            rows.append(
                f"{name:<10} {t.questions:>9} {t.answered_rate:>9.3f} {t.precision:>9.3f} "
                f"{t.per_context(t.duplicates):>9.3f} {t.mrr:>6.3f} {t.per_context(t.rendered):>9.2f} "
                f"{t.per_context(t.tokens):>10.1f}"
            )
        return "\n".join(rows)


def run_eval_known_facts(args: argparse.Namespace) -> int:
    users = load(args.data)
    questions = sum(len(u.questions) for u in users)
    print(
        f"eval-known-facts: {len(users)} users, {questions} questions from {args.data.name}; "
        f"--embedder {args.embedder}; BuildContext with a {BUDGET_TOKENS}-token budget, known facts on "
        "(agent defaults), recall and knowledge off"
    )
    report = asyncio.run(_evaluate(users, args.embedder, args.show))
    if report.missing:
        print(f"extracted memories not found (labels): {', '.join(report.missing)}")
    print(f"extracted memories without a label: {report.unlabelled}")
    print(report.table())
    total = report.overall()
    if not args.gate:
        return 0
    checks = [
        ("answered", total.answered_rate, args.floor_answered, False),
        ("precision", total.precision, args.floor_precision, False),
        ("mrr", total.mrr, args.floor_mrr, False),
        ("duplicates per context", total.per_context(total.duplicates), args.ceiling_duplicates, True),
    ]
    failed = [
        f"{name} {value:.3f} {'>' if ceiling else '<'} {bound}"
        for name, value, bound, ceiling in checks
        if (value > bound if ceiling else value < bound)
    ]
    print("gate: " + ("FAILED: " + "; ".join(failed) if failed else "passed"))
    return 1 if failed else 0


async def _evaluate(users: Sequence[User], embedder: str, show: bool) -> Report:
    report = Report()
    with tempfile.TemporaryDirectory(prefix="episodic-eval-known-facts-") as tmp:
        async with (
            running_server(f"sqlite:///{tmp}/eval.db", Path(tmp), ("--embedder", embedder)) as server,
            AsyncEpisodicClient(server.target, timeout=CALL_TIMEOUT_SECONDS) as client,
        ):
            await client.create_agent(AGENT, model="gpt-4o", memory_config=MEMORY)
            for user in users:
                labels = await _load_user(client, user, report)
                tally = report.users.setdefault(user.user_id, Tally())
                for q in user.questions:
                    seen = await _ask(client, user, q, labels)
                    tally.add(user, q, seen)
                    if show:
                        mark = "ok " if q.gold & set(seen.rendered) else "MISS"
                        print(f"  {mark} {user.user_id}: {q.text!r} -> {list(seen.rendered)}")
    return report


async def _load_user(client: AsyncEpisodicClient, user: User, report: Report) -> dict[str, str]:
    """Writes the user's memories and closes its episodes; returns memory id -> label."""
    labels: dict[str, str] = {}
    made = await client.create_memories(
        [memory_input(text, kind) for _, text, kind in user.client], agent_id=AGENT, user_id=user.user_id
    )
    for (label, _, _), result in zip(user.client, made.results, strict=True):
        labels[result.memory.memory_id] = label
    for messages in user.episodes:
        episode = (await client.open_episode(AGENT, user.user_id)).episode.episode_id
        for text in messages:
            await client.add_message(episode, "user", text)
            await client.add_message(episode, "assistant", "Thanks, noted.")
        await client.close_episode(episode, wait_for_digest=True)
    listed = await client.list_memories(AGENT, user.user_id, page_size=200)
    found = set()
    for memory in listed.memories:
        if memory.memory_id in labels:
            continue
        text = " ".join(memory.text.casefold().replace("’", "'").split())
        label = next((lab for lab, match in user.extracted if match in text), "")
        if label:
            labels[memory.memory_id] = label
            found.add(label)
        else:
            report.unlabelled += 1
    report.missing += [lab for lab, _ in user.extracted if lab not in found]
    return labels


async def _ask(client: AsyncEpisodicClient, user: User, q: Question, labels: dict[str, str]) -> Seen:
    probe = (await client.open_episode(AGENT, user.user_id)).episode.episode_id
    built = await client.build_context(probe, user_message=q.text)
    content = "\n".join(m.content for m in built.messages if m.section == KNOWN_FACTS)
    rendered = [m.memory_id for m in built.report.recalled_memories if m.rendered]
    assert len(rendered) == content.count("\n- "), "the report and the section disagree"
    return Seen(tuple(labels.get(i, "") for i in rendered), built.report.section_tokens.known_facts)
