"""Quality gate on a fixed, hand-written data set: every PII detector keeps precision >= 0.95 and
recall >= 0.90 on tests/data/pii_labelled.jsonl (see `episodic-lab eval-pii`), and the set stays big enough
to mean something."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from episodic.domain.pii import Finding, PiiKind
from episodic_lab.evals.pii import MIN_PRECISION, MIN_RECALL, Evaluation, Sample, evaluate, load, score_sample

LABELLED = Path(__file__).parents[1] / "data" / "pii_labelled.jsonl"


@pytest.fixture(scope="module")
def samples() -> list[Sample]:
    return load(LABELLED)


@pytest.fixture(scope="module")
def evaluation(samples: list[Sample]) -> Evaluation:
    return evaluate(samples)


@pytest.mark.parametrize("kind", list(PiiKind))
def test_each_detector_keeps_its_precision_and_recall(evaluation: Evaluation, kind: PiiKind) -> None:
    kind_score = evaluation.scores[kind]
    errors = [e for e in evaluation.errors if e.split()[1] == kind.value]
    assert kind_score.precision >= MIN_PRECISION, errors
    assert kind_score.recall >= MIN_RECALL, errors


def test_the_set_has_200_positives_and_200_negatives(samples: list[Sample]) -> None:
    positives = [s for s in samples if s.kind is not None]
    assert len(positives) >= 200
    assert len(samples) - len(positives) >= 200


@pytest.mark.parametrize("kind", list(PiiKind))
def test_the_set_has_25_positives_and_25_near_misses_per_kind(samples: list[Sample], kind: PiiKind) -> None:
    assert Counter(s.kind for s in samples)[kind] >= 25
    assert Counter(s.near for s in samples if s.kind is None)[kind] >= 25


def test_every_labelled_value_occurs_in_its_text(samples: list[Sample]) -> None:
    positives = [s for s in samples if s.kind is not None]
    assert all(s.value and s.value in s.text for s in positives)


def test_a_finding_away_from_the_labelled_value_is_a_false_positive_of_its_kind() -> None:
    sample = Sample("mail a@example.com from 203.0.113.9", PiiKind.EMAIL, "a@example.com", None)
    evaluation = Evaluation()
    score_sample(sample, [Finding(PiiKind.EMAIL, 5, 18), Finding(PiiKind.IP, 24, 35)], evaluation)
    assert (evaluation.scores[PiiKind.EMAIL].tp, evaluation.scores[PiiKind.IP].fp) == (1, 1)


def test_a_finding_that_covers_only_part_of_the_value_is_a_false_negative() -> None:
    sample = Sample("call +44 20 7946 0958", PiiKind.PHONE, "+44 20 7946 0958", None)
    evaluation = Evaluation()
    score_sample(sample, [Finding(PiiKind.PHONE, 5, 11)], evaluation)
    assert (evaluation.scores[PiiKind.PHONE].tp, evaluation.scores[PiiKind.PHONE].fn) == (0, 1)
