"""Summarizers that digest a closed episode into a summary and short key facts."""

from episodic.summarize.extractive import ExtractiveSummarizer
from episodic.summarize.factory import SUMMARIZER_KINDS, make_summarizer
from episodic.summarize.openai_chat import OpenAIChatConfig, OpenAIChatSummarizer

__all__ = [
    "SUMMARIZER_KINDS",
    "ExtractiveSummarizer",
    "OpenAIChatConfig",
    "OpenAIChatSummarizer",
    "make_summarizer",
]
