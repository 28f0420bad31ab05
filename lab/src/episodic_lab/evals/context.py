"""`episodic-lab eval-recall --what-the-model-sees`: what BuildContext renders of LoCoMo.

The sessions are loaded as eval-recall loads them (one closed, digested episode each, user =
sample_id, the agent's default memory config). Then for each question an empty probe episode
of that user is opened and BuildContext is called with the question as user message (not
appended; HYBRID recall, top 5, a 4k budget, set on the request). Per category and overall:

- evidence rendered: an evidence session's episode is among the report's recalled episodes
  with `rendered` set;
- coverage (answerable categories 1, 2, 4): the share of the gold answer's words present in
  the rendered [Past Conversations] text, in BM25-ranked raw transcripts of the same
  conversation (each headed by its session's date, best first) cut to as many characters,
  and in the evidence sessions' full text (the ceiling); a question is covered at >= 0.5;
- recall tokens: the report's past_conversations section tokens (mean, p50, p90).

Probe episodes stay open and empty: closing them would make them recallable."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
from collections.abc import Sequence

from episodic.progress import Progress
from episodic_client import AsyncEpisodicClient
from episodic_client.v1 import agent_pb2, context_pb2
from episodic_lab.evals.bm25 import Bm25
from episodic_lab.evals.coverage import ANSWERABLE, Asked, ContextReport, Summary, coverage, words
from episodic_lab.evals.locomo import AGENT, loaded_server
from episodic_lab.evals.locomo_data import Question, Session, load

BUDGET_TOKENS = 4000
RECALL_TOP_K = 5
MEMORY = agent_pb2.MemoryConfig(
    max_working_memory_tokens=BUDGET_TOKENS,
    recall_mode=agent_pb2.RECALL_MODE_HYBRID,
    recall_top_k=RECALL_TOP_K,
)
PAST = context_pb2.CONTEXT_SECTION_PAST_CONVERSATIONS
SHOWN = (context_pb2.CONTEXT_SECTION_KNOWN_FACTS, PAST)  # what coverage reads: what recall rendered


def run_eval_context(args: argparse.Namespace) -> int:
    sessions, questions = load(args.data)
    if args.limit:
        questions = questions[: args.limit]
    settings = {"on": (True,), "off": (False,), "compare": (False, True)}[args.known_facts]
    recall = agent_pb2.RECALL_MODE_NONE if args.recall == "none" else agent_pb2.RECALL_MODE_HYBRID
    reports = asyncio.run(_evaluate(sessions, questions, args.embedder, settings, recall))
    for facts, report in reports.items():
        print(
            f"what the model sees: {len(questions)} questions, BuildContext on an empty probe episode "
            f"(HYBRID, top {RECALL_TOP_K}, {BUDGET_TOKENS}-token budget, --embedder {args.embedder}, "
            f"known facts {'on' if facts else 'off'}, recall {args.recall})"
        )
        print(report.table())
    if len(reports) == 2:
        print(facts_difference(reports[False], reports[True]))
    report = reports[settings[-1]]
    summaries = report.summaries()
    if args.json:
        args.json.write_text(json.dumps(_json(args, report, summaries), indent=2) + "\n")
    failures = gate_failures(summaries["overall"], args.floor_evidence, args.floor_covered)
    for failure in failures:
        print(f"gate: {failure}")
    return 1 if args.gate_context and failures else 0


def gate_failures(overall: Summary, floor_evidence: float, floor_covered: float) -> list[str]:
    """Why the gate would fail: evidence rendered or the covered share below their floors, or
    the rendered recall covering fewer answers than BM25's raw text at equal characters."""
    failures = []
    if overall.evidence_rendered < floor_evidence:
        failures.append(f"evidence rendered {overall.evidence_rendered:.3f} < floor {floor_evidence}")
    rendered, raw = overall.coverage["rendered"], overall.coverage["bm25_raw"]
    if rendered is not None and raw is not None:
        if rendered.covered < floor_covered:
            failures.append(f"rendered covered {rendered.covered:.3f} < floor {floor_covered}")
        if rendered.covered < raw.covered:
            failures.append(f"rendered covered {rendered.covered:.3f} < bm25 raw {raw.covered:.3f}")
    return failures


def facts_difference(off: ContextReport, on: ContextReport) -> str:
    """Covered share (rendered text) with known facts minus without, per category."""
    lines = ["known facts on - off, covered share of the rendered context (same budget):"]
    before, after = off.summaries(), on.summaries()
    for category, summary in after.items():
        c_on, c_off = summary.coverage["rendered"], before[category].coverage["rendered"]
        if c_on is not None and c_off is not None:
            change = c_on.covered - c_off.covered
            lines.append(f"  {category:<12} {c_off.covered:.3f} -> {c_on.covered:.3f} ({change:+.3f})")
    return "\n".join(lines)


async def _evaluate(
    sessions: list[Session],
    questions: list[Question],
    embedder: str,
    settings: Sequence[bool],
    recall: agent_pb2.RecallMode.ValueType,
) -> dict[bool, ContextReport]:
    raw = RawText(sessions)
    reports = {facts: ContextReport() for facts in settings}
    async with loaded_server(sessions, embedder) as client:
        for facts, report in reports.items():
            memory = agent_pb2.MemoryConfig()
            memory.CopyFrom(MEMORY)
            memory.known_facts = facts
            memory.recall_mode = recall
            label = f"BuildContext (known facts {'on' if facts else 'off'})"
            with Progress(label, len(questions), unit="questions") as bar:
                for q in questions:
                    report.add(await _ask(client, q, raw, memory))
                    bar.advance()
    return reports


async def _ask(
    client: AsyncEpisodicClient, q: Question, raw: RawText, memory: agent_pb2.MemoryConfig
) -> Asked:
    probe = (await client.open_episode(AGENT, q.sample_id)).episode.episode_id
    built = await client.build_context(probe, user_message=q.text, memory_config=memory)
    recalled = "\n".join(m.content for m in built.messages if m.section in SHOWN)
    evidence = {f"{q.sample_id}-{s}" for s in q.evidence}
    rendered = any(r.rendered and r.episode_id in evidence for r in built.report.recalled_episodes)
    answer = words(q.answer)
    scored = q.category in ANSWERABLE and bool(answer)
    return Asked(
        question_id=q.question_id,
        category=q.category,
        evidence_rendered=rendered,
        recall_tokens=built.report.section_tokens.past_conversations
        + built.report.section_tokens.known_facts,
        recall_chars=len(recalled),
        coverage={
            "rendered": coverage(answer, recalled),
            "bm25_raw": coverage(answer, raw.ranked(q)[: len(recalled)]),
            "ceiling": coverage(answer, raw.evidence(q)),
        }
        if scored
        else {},
    )


class RawText:
    """The sessions' raw transcripts, by conversation, each headed by its date as the data
    writes it (temporal answers are dates; the rendered recall dates its episodes too)."""

    def __init__(self, sessions: Sequence[Session]) -> None:
        self._texts: dict[str, dict[str, str]] = {}
        for s in sessions:
            header = [s.date_time] if s.date_time else []
            self._texts.setdefault(s.sample_id, {})[s.session_id] = "\n".join(header + s.lines())
        self._indexes = {sample: Bm25(list(texts.values())) for sample, texts in self._texts.items()}

    def ranked(self, q: Question) -> str:
        """Every session of the question's conversation, best BM25 score first."""
        texts = list(self._texts[q.sample_id].values())
        scores = self._indexes[q.sample_id].scores(q.text)
        order = sorted(range(len(texts)), key=lambda i: -scores[i])
        return "\n\n".join(texts[i] for i in order)

    def evidence(self, q: Question) -> str:
        texts = self._texts[q.sample_id]
        return "\n\n".join(texts[s] for s in sorted(q.evidence) if s in texts)


def _json(args: argparse.Namespace, report: ContextReport, summaries: dict[str, Summary]) -> object:
    return {
        "data": str(args.data),
        "embedder": args.embedder,
        "memory_config": {
            "budget_tokens": BUDGET_TOKENS,
            "recall_mode": "hybrid",
            "recall_top_k": RECALL_TOP_K,
        },
        "categories": {c: dataclasses.asdict(s) for c, s in summaries.items()},
        "questions": [dataclasses.asdict(a) for a in report.by_category["overall"]],
    }
