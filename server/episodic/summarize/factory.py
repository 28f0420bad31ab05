"""Choosing a summarizer by name, as configuration names it."""

from __future__ import annotations

from typing import Any

from episodic.domain.ports.models import Summarizer
from episodic.summarize.extractive import ExtractiveSummarizer
from episodic.summarize.openai_chat import OpenAIChatConfig, OpenAIChatSummarizer

SUMMARIZER_KINDS = ("extractive", "openai")


def make_summarizer(kind: str = "extractive", **options: Any) -> Summarizer:
    """ "extractive" takes ExtractiveSummarizer's limits as options; "openai" takes
    OpenAIChatConfig's fields (base_url and model are required)."""
    name = kind.strip().lower() or "extractive"
    if name == "extractive":
        return ExtractiveSummarizer(**options)
    if name == "openai":
        return OpenAIChatSummarizer(OpenAIChatConfig(**options))
    raise ValueError(f"unknown summarizer kind {kind!r}; allowed kinds: {', '.join(SUMMARIZER_KINDS)}")
