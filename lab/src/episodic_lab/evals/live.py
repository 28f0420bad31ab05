"""`episodic-lab eval-live`: what the model sees of its own long conversation.

Each LoCoMo conversation is replayed into ONE open episode, as a gateway would run it, once per
budget (`--budgets`, an agent each: max_working_memory_tokens = the budget, HYBRID recall,
defaults otherwise; user = sample_id). Its sessions in order, each turn in order: a turn of the
first speaker (session.speakers[0]) is the user's, and a BuildContext is drained on it; a turn
of the other speaker is an AddMessage(role assistant). Content is "{speaker}: {text}" (an image
caption included, as `Session.lines()` writes it); every message's create_time is the session's
start plus one second per turn index, so the log carries the conversation's dates.

BuildContextRequest has no create_time (an appended user message would be dated "now"), so a
user turn is AddMessage(role user, create_time=...) and then BuildContext without appending:
user_message empty and recall_query the turn's text. Recall searches with the same text as an
appending call would, and the render is the one an appending call gets (the turn last, once):
with user_message set as well, the server would render the turn twice (from the log and as the
current message), spending budget a gateway's call does not spend.

Then each answerable question of the conversation (categories 1, 2, 4 with a gold answer;
`--limit N`: the first N of each conversation) is asked at the end: BuildContext(user_message=
the question, not appended, so questions do not see each other) on the same episode. What is
measured is the share of the gold answer's words (coverage.words) present in
- rendered: every rendered message of that call but the question itself (all sections),
  reassembled by the client from its frames;
- tail@chars: the last N characters of the client-side transcript, N = len(rendered);
- bm25-windows@chars: the transcript's 4-turn windows (stride 2), ranked by BM25 against the
  question, best first, each line once, cut to N characters;
- ceiling: the whole transcript.
A question is covered at >= COVERED_AT (0.5). Each transcript line carries its session's date
("[8 May 2023] Caroline: ..."), so a temporal answer is in every baseline's text with its line.
Printed per budget: per conversation, per category and overall, then the mean tokens of each
report section (every field of SectionTokens, read from its descriptor), and the wall time."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from functools import cached_property

from episodic.progress import Progress
from episodic_client import AsyncEpisodicClient
from episodic_client.v1 import agent_pb2, context_pb2
from episodic_lab.evals.bm25 import Bm25
from episodic_lab.evals.coverage import ANSWERABLE, COVERED_AT, Cover, coverage, words
from episodic_lab.evals.locomo import AGENT, throwaway_server
from episodic_lab.evals.locomo_data import Question, Session, load

TURN_STEP = timedelta(seconds=1)
WINDOW_TURNS = 4
WINDOW_STRIDE = 2
METHODS = ("rendered", "tail", "bm25_windows", "ceiling")
HEADS = ("rendered", "tail@chars", "bm25-win@chars", "ceiling")
QUESTION = context_pb2.CONTEXT_SECTION_USER_MESSAGE
SECTIONS = tuple(f.name for f in context_pb2.SectionTokens.DESCRIPTOR.fields)  # new ones appear by themselves


def agent_of(budget: int) -> str:
    return f"{AGENT}-live-{budget}"


def day(session: Session) -> str:
    return f"{session.started.day} {session.started:%B %Y}"


def windows(count: int, size: int = WINDOW_TURNS, stride: int = WINDOW_STRIDE) -> list[range]:
    """Line ranges of `size` consecutive lines every `stride` lines; the last one ends at the
    last line, so every line is in a window."""
    if count <= 0:
        return []
    starts = list(range(0, max(count - size, 0) + 1, stride))
    if starts[-1] + size < count:
        starts.append(count - size)
    return [range(start, min(start + size, count)) for start in starts]


def best_first(lines: Sequence[str], ranges: Sequence[range], scores: Sequence[float], chars: int) -> str:
    """The windows' lines, best score first (ties: the earlier window), each line once (where
    windows overlap, a later one brings only its new lines), cut to `chars` characters."""
    taken: set[int] = set()
    blocks: list[str] = []
    size = 0
    for i in sorted(range(len(ranges)), key=lambda i: -scores[i]):
        if size >= chars:
            break
        new = [j for j in ranges[i] if j not in taken]
        if new:
            taken.update(new)
            blocks.append("\n".join(lines[j] for j in new))
            size += len(blocks[-1]) + 2
    return "\n\n".join(blocks)[:chars]


def tail(text: str, chars: int) -> str:
    """Plain truncation: the last `chars` characters."""
    return text[-chars:] if chars > 0 else ""


class Transcript:
    """A conversation's log as the client keeps it: one line per turn, dated by its session."""

    def __init__(self, sessions: Sequence[Session]) -> None:
        self.lines = [f"[{day(s)}] {line}" for s in sessions for line in s.lines()]
        self.text = "\n".join(self.lines)
        self._windows = windows(len(self.lines))
        self._index = Bm25(["\n".join(self.lines[j] for j in w) for w in self._windows])

    @cached_property
    def words(self) -> set[str]:
        return words(self.text)

    def best_windows(self, query: str, chars: int) -> str:
        return best_first(self.lines, self._windows, self._index.scores(query), chars)


def answerable(questions: Sequence[Question]) -> list[Question]:
    """The questions coverage can score: an answerable category and an answer with words."""
    return [q for q in questions if q.category in ANSWERABLE and words(q.answer)]


def coverages(q: Question, rendered: str, transcript: Transcript) -> dict[str, float]:
    """The answer's coverage by each method, the baselines cut to the rendered text's size."""
    answer, chars = words(q.answer), len(rendered)
    return {
        "rendered": coverage(answer, rendered),
        "tail": coverage(answer, tail(transcript.text, chars)),
        "bm25_windows": coverage(answer, transcript.best_windows(q.text, chars)),
        "ceiling": len(answer & transcript.words) / len(answer),
    }


@dataclass(frozen=True, slots=True)
class Conversation:
    sample_id: str
    sessions: tuple[Session, ...]  # in the data's order
    questions: tuple[Question, ...]  # the answerable ones asked

    @property
    def turns(self) -> int:
        return sum(len(s.turns) for s in self.sessions)


def conversations_of(
    sessions: Sequence[Session], questions: Sequence[Question], limit: int = 0
) -> list[Conversation]:
    """Each conversation with its answerable questions (the first `limit` of each, 0: all)."""
    found = []
    for sample in dict.fromkeys(s.sample_id for s in sessions):
        asked = answerable([q for q in questions if q.sample_id == sample])
        mine = tuple(s for s in sessions if s.sample_id == sample)
        found.append(Conversation(sample, mine, tuple(asked[:limit] if limit else asked)))
    return found


@dataclass(frozen=True, slots=True)
class Probe:
    """One question asked at the end of its conversation's replay."""

    sample_id: str
    question_id: str
    category: str
    tokens: int  # of the rendered messages but the question
    chars: int
    coverage: dict[str, float]  # by method
    sections: dict[str, int]  # the report's section tokens


@dataclass(frozen=True, slots=True)
class Row:
    """Means over some probes."""

    questions: int
    coverage: dict[str, Cover]
    tokens: float
    chars: float
    sections: dict[str, float]


Summaries = dict[int, dict[str, Row]]  # rows by label, by budget


def summarize(probes: Sequence[Probe]) -> Row:
    n = max(len(probes), 1)

    def mean(values: Sequence[float]) -> float:
        return sum(values) / n

    def cover(method: str) -> Cover:
        values = [p.coverage[method] for p in probes]
        return Cover(mean(values), mean([v >= COVERED_AT for v in values]))

    return Row(
        questions=len(probes),
        coverage={m: cover(m) for m in METHODS},
        tokens=mean([p.tokens for p in probes]),
        chars=mean([p.chars for p in probes]),
        sections={name: mean([p.sections.get(name, 0) for p in probes]) for name in SECTIONS},
    )


def rows(probes: Sequence[Probe]) -> dict[str, Row]:
    """By conversation, then by category, then overall."""
    groups: dict[str, list[Probe]] = {}
    for key in ("sample_id", "category"):
        for label in sorted({getattr(p, key) for p in probes}):
            groups[label] = [p for p in probes if getattr(p, key) == label]
    groups["overall"] = list(probes)
    return {label: summarize(group) for label, group in groups.items()}


def table(summaries: dict[str, Row]) -> str:
    lines = [f"{'':<12} {'n':>4}" + "".join(f" | {h:>14} mean  >=.5" for h in HEADS) + " | tokens  chars"]
    for label, r in summaries.items():
        cells = "".join(f" | {r.coverage[m].mean:>19.3f} {r.coverage[m].covered:>5.3f}" for m in METHODS)
        lines.append(f"{label:<12} {r.questions:>4}{cells} | {r.tokens:>6.0f} {r.chars:>6.0f}")
    return "\n".join(lines)


def sections_line(overall: Row) -> str:
    return "section tokens (mean): " + ", ".join(f"{name} {overall.sections[name]:.0f}" for name in SECTIONS)


# How far the rendered mean coverage may trail BM25 windows' before the gate fails: on dev the
# two are level (0.855 / 0.886 both at 4k / 8k), and one question moves a mean by ~0.004.
BM25_MARGIN = 0.02


def gate_failures(overall: dict[int, Row], floors: dict[int, float]) -> tuple[list[str], list[str]]:
    """(checks passed, checks failed): at each floored budget measured, the rendered covered
    share against its floor, and the rendered mean coverage against BM25 windows' at the same
    characters (the mean: on two conversations the covered share moves by a question or two,
    ~0.005 each, between runs of the same build, and LoCoMo's keys are ~6% wrong)."""
    passed: list[str] = []
    failed: list[str] = []
    for budget, floor in floors.items():
        if budget not in overall:
            passed.append(f"{budget} tokens: not measured (--budgets), floor {floor} not checked")
            continue
        rendered, bm25 = overall[budget].coverage["rendered"], overall[budget].coverage["bm25_windows"]
        checks = (
            ("covered", rendered.covered, floor, f"floor {floor}"),
            ("mean", rendered.mean, bm25.mean - BM25_MARGIN, f"bm25 windows {bm25.mean:.3f} - {BM25_MARGIN}"),
        )
        for what, value, bound, name in checks:
            check = f"{budget} tokens: rendered {what} {value:.3f} {'>=' if value >= bound else '<'} {name}"
            (passed if value >= bound else failed).append(check)
    return passed, failed


def run_eval_live(args: argparse.Namespace) -> int:
    sessions, questions = load(args.data)
    conversations = conversations_of(sessions, questions, args.limit)
    asked = sum(len(c.questions) for c in conversations)
    started = time.perf_counter()
    probes = asyncio.run(_evaluate(conversations, args.budgets, args.embedder))
    wall = time.perf_counter() - started
    summaries = {budget: rows(found) for budget, found in probes.items()}
    for budget, summary in summaries.items():
        print(
            f"\nlive episode, {budget}-token budget: {len(conversations)} conversations replayed into one "
            f"open episode each ({sum(c.turns for c in conversations)} turns), {asked} answerable questions "
            f"asked at the end (HYBRID, --embedder {args.embedder}); covered at >= {COVERED_AT}"
        )
        print(table(summary))
        print(sections_line(summary["overall"]))
    passed, failed = gate_failures(
        {b: s["overall"] for b, s in summaries.items()}, {4000: args.floor_4k, 8000: args.floor_8k}
    )
    if args.gate:
        for line in passed:
            print(f"gate: {line}: ok")
        for line in failed:
            print(f"gate: {line}: FAILED")
        print("gate: " + ("FAILED" if failed else "passed"))
    print(f"wall time {wall:.1f} s")
    if args.json:
        args.json.write_text(json.dumps(_json(args, summaries, probes, wall), indent=2) + "\n")
    return 1 if args.gate and failed else 0


async def _evaluate(
    conversations: Sequence[Conversation], budgets: Sequence[int], embedder: str
) -> dict[int, list[Probe]]:
    transcripts = {c.sample_id: Transcript(c.sessions) for c in conversations}
    probes: dict[int, list[Probe]] = {}
    async with throwaway_server(embedder) as client:
        for budget in budgets:
            memory = agent_pb2.MemoryConfig(
                max_working_memory_tokens=budget, recall_mode=agent_pb2.RECALL_MODE_HYBRID
            )
            await client.create_agent(agent_of(budget), model="gpt-4o", memory_config=memory)
            probes[budget] = []
            for c in conversations:
                where = f"{c.sample_id} ({budget} tokens)"
                episode = await _replay(client, agent_of(budget), c, f"replay {where}")
                with Progress(f"ask {where}", len(c.questions), unit="questions") as bar:
                    for q in c.questions:
                        probes[budget].append(await _ask(client, episode, q, transcripts[c.sample_id]))
                        bar.advance()
    return probes


async def _replay(client: AsyncEpisodicClient, agent: str, c: Conversation, label: str) -> str:
    """The conversation as one open episode, a BuildContext drained on every user turn; its id."""
    opened = await client.open_episode(agent, c.sample_id, start_time=c.sessions[0].started)
    episode = opened.episode.episode_id
    with Progress(label, c.turns, unit="turns") as bar:
        for session in c.sessions:
            for i, (turn, content) in enumerate(zip(session.turns, session.lines(), strict=True)):
                user = turn.speaker == session.speakers[0]
                when = session.started + TURN_STEP * i
                await client.add_message(episode, "user" if user else "assistant", content, create_time=when)
                if user:
                    await client.build_context(episode, recall_query=content)
                bar.advance()
    return episode


async def _ask(client: AsyncEpisodicClient, episode: str, q: Question, transcript: Transcript) -> Probe:
    built = await client.build_context(episode, user_message=q.text)
    shown = [m for m in built.messages if m.section != QUESTION]
    rendered = "\n".join(m.content for m in shown)
    tokens = built.report.section_tokens
    return Probe(
        sample_id=q.sample_id,
        question_id=q.question_id,
        category=q.category,
        tokens=sum(m.token_count for m in shown),
        chars=len(rendered),
        coverage=coverages(q, rendered, transcript),
        sections={name: getattr(tokens, name) for name in SECTIONS},
    )


def _json(
    args: argparse.Namespace, summaries: Summaries, probes: dict[int, list[Probe]], wall: float
) -> object:
    return {
        "data": str(args.data),
        "embedder": args.embedder,
        "windows": {"turns": WINDOW_TURNS, "stride": WINDOW_STRIDE},
        "covered_at": COVERED_AT,
        "wall_seconds": round(wall, 1),
        "budgets": {
            str(budget): {
                "groups": {label: dataclasses.asdict(r) for label, r in summary.items()},
                "questions": [dataclasses.asdict(p) for p in probes[budget]],
            }
            for budget, summary in summaries.items()
        },
    }
