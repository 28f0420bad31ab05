"""`episodic-lab eval-pii`: precision and recall of each PII detector on a labelled set.

Each JSONL line is {"text", "kind", "value", "near", "note"}. A positive line (kind set) scores a true
positive when one finding of its kind covers the labelled value, a false negative otherwise. Any other
finding (on a negative line, of another kind, or away from the labelled value) is a false positive of
the kind found. A negative line's "near" names the detector it is a near miss for."""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from episodic.domain.pii import Finding, PiiKind, find_pii, redact

# lab/src/episodic_lab/evals/pii.py -> the repository root holds tests/data.
DEFAULT_DATA = Path(__file__).resolve().parents[4] / "tests" / "data" / "pii_labelled.jsonl"
MIN_PRECISION = 0.95
MIN_RECALL = 0.90
TIMED_MESSAGE_CHARS = 4096


@dataclass(frozen=True, slots=True)
class Sample:
    text: str
    kind: PiiKind | None
    value: str | None
    near: PiiKind | None
    note: str = ""

    def value_span(self) -> tuple[int, int]:
        assert self.value is not None, "negative samples have no labelled value"
        start = self.text.index(self.value)
        return start, start + len(self.value)


@dataclass
class KindScore:
    positives: int = 0
    negatives: int = 0
    tp: int = 0
    fp: int = 0
    fn: int = 0

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else 1.0

    @property
    def recall(self) -> float:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else 1.0

    def passes(self) -> bool:
        return self.precision >= MIN_PRECISION and self.recall >= MIN_RECALL


@dataclass
class Evaluation:
    scores: dict[PiiKind, KindScore] = field(default_factory=lambda: {k: KindScore() for k in PiiKind})
    errors: list[str] = field(default_factory=list)

    def failing(self) -> list[PiiKind]:
        return [kind for kind, score in self.scores.items() if not score.passes()]

    def table(self) -> str:
        lines = [f"{'kind':<7} {'pos':>4} {'neg':>4} {'TP':>4} {'FP':>4} {'FN':>4}  precision  recall"]
        for kind, s in self.scores.items():
            counts = f"{s.positives:>4} {s.negatives:>4} {s.tp:>4} {s.fp:>4} {s.fn:>4}"
            lines.append(f"{kind.value:<7} {counts}  {s.precision:>9.3f}  {s.recall:>6.3f}")
        return "\n".join(lines)


def load(path: Path) -> list[Sample]:
    with path.open(encoding="utf-8") as lines:
        return [_sample(json.loads(line)) for line in lines if line.strip()]


def _sample(row: dict[str, str | None]) -> Sample:
    def kind(name: str) -> PiiKind | None:
        value = row.get(name)
        return PiiKind(value) if value else None

    return Sample(str(row["text"]), kind("kind"), row.get("value"), kind("near"), str(row.get("note") or ""))


def evaluate(samples: Iterable[Sample]) -> Evaluation:
    evaluation = Evaluation()
    for sample in samples:
        score_sample(sample, find_pii(sample.text), evaluation)
    return evaluation


def score_sample(sample: Sample, findings: list[Finding], evaluation: Evaluation) -> None:
    if sample.kind is None:
        if sample.near is not None:
            evaluation.scores[sample.near].negatives += 1
        _count_false_positives(sample, findings, evaluation)
    else:
        _score_positive(sample, sample.kind, findings, evaluation)


def _score_positive(sample: Sample, kind: PiiKind, findings: list[Finding], evaluation: Evaluation) -> None:
    score = evaluation.scores[kind]
    score.positives += 1
    start, end = sample.value_span()
    on_target = [f for f in findings if f.kind == kind and f.start < end and start < f.end]
    _count_false_positives(sample, [f for f in findings if f not in on_target], evaluation)
    if any(f.start <= start and end <= f.end for f in on_target):
        score.tp += 1
    else:
        score.fn += 1
        evaluation.errors.append(f"FN {kind.value:<6} {sample.text!r}")


def _count_false_positives(sample: Sample, findings: list[Finding], evaluation: Evaluation) -> None:
    for finding in findings:
        evaluation.scores[finding.kind].fp += 1
        flagged = sample.text[finding.start : finding.end]
        evaluation.errors.append(f"FP {finding.kind.value:<6} {flagged!r} in {sample.text!r}")


def redaction_microseconds(text: str, repeats: int = 200) -> float:
    """Median wall time of one `redact(text)` call."""
    timings = []
    for _ in range(repeats):
        started = time.perf_counter()
        redact(text)
        timings.append(time.perf_counter() - started)
    return statistics.median(timings) * 1e6


_CHAT = (
    "Thanks for the update on the migration. I checked the dashboard this morning and the queue is back to "
    "normal; the backlog from Tuesday cleared in about 40 minutes. Can we move the retro to Thursday at 3pm? "
    "The new build (2.14.1) fixed the timeout, and memory stays under 512 MB even with 20 workers. "
)
_CHAT_PII = "The client wants invoices sent to jane.doe@example.com, and a call on +44 20 7946 0958 first. "


def timed_messages(samples: list[Sample]) -> dict[str, str]:
    """4 KB messages: ordinary chat without PII and with two values, and the labelled lines shuffled (a
    fixed seed), every kind and near miss mixed: a dense worst case."""
    chat = _CHAT * (TIMED_MESSAGE_CHARS // len(_CHAT) + 1)
    shuffled = random.Random(0).sample(samples, len(samples))
    return {
        "chat, no PII": chat[:TIMED_MESSAGE_CHARS],
        "chat, 2 PII values": (_CHAT_PII + chat)[:TIMED_MESSAGE_CHARS],
        "labelled lines, dense PII": "\n".join(s.text for s in shuffled)[:TIMED_MESSAGE_CHARS],
    }


def run_eval_pii(args: argparse.Namespace) -> int:
    samples = load(Path(args.data) if args.data else DEFAULT_DATA)
    evaluation = evaluate(samples)
    positives = sum(s.kind is not None for s in samples)
    print(f"{len(samples)} labelled lines: {positives} positive, {len(samples) - positives} negative")
    print(evaluation.table())
    if args.errors:
        print("\n".join(evaluation.errors) or "no errors")
    for name, message in timed_messages(samples).items():
        micros = redaction_microseconds(message)
        print(f"redact() of {len(message)} characters ({name}): {micros:.0f} µs median")
    failing = evaluation.failing()
    if failing:
        names = ", ".join(kind.value for kind in failing)
        print(f"below precision {MIN_PRECISION} or recall {MIN_RECALL}: {names}")
    return 1 if failing else 0
