"""The figures as JSON (--json): the printed ones plus the derived ratios, NaN as null."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any

from episodic_lab.bench.report import _finite as finite
from episodic_lab.bench_context.history import p50_ratio
from episodic_lab.bench_context.options import Options
from episodic_lab.bench_context.report import BackendReport
from episodic_lab.bench_recall.embedding import EmbeddingCost


def to_json(
    machine: dict[str, str],
    options: Options,
    backends: Sequence[BackendReport],
    embedding: EmbeddingCost | None,
) -> str:
    document = {
        "machine": machine,
        "options": dataclasses.asdict(options),
        "backends": [_backend(report) for report in backends],
        "query_embedding": _embedding(embedding) if embedding else None,
    }
    return json.dumps(finite(document), indent=2) + "\n"


def _backend(report: BackendReport) -> dict[str, Any]:
    document = dataclasses.asdict(report)
    for row, shown in zip(report.throughput, document["throughput"], strict=True):
        shown["ratio"] = row.ratio
    document["history_p50_ratio"] = p50_ratio(report.history) if report.history else None
    if report.per_conversation is not None:
        document["per_conversation"]["kib_each"] = report.per_conversation.kib_each
    if report.growth is not None:
        document["growth"]["change_mib"] = report.growth.change_mib
    return document


def _embedding(cost: EmbeddingCost) -> dict[str, Any]:
    return {**dataclasses.asdict(cost), "rps": cost.figures.rps}
