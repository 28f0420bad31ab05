"""The settings' choices: each a `StrEnum` whose values are what a flag, a variable or the
configuration file accepts."""

from __future__ import annotations

import enum


class EmbedderKind(enum.StrEnum):
    MINILM = "minilm"
    MINILM_FP32 = "minilm-fp32"
    OPENAI = "openai"
    HASHING = "hashing"


class SummarizerKind(enum.StrEnum):
    EXTRACTIVE = "extractive"
    OPENAI = "openai"


class ExtractorKind(enum.StrEnum):
    EXTRACTIVE = "extractive"
    OPENAI = "openai"


class LogLevel(enum.StrEnum):
    DEBUG = "DEBUG"
    INFO = "INFO"
    WARNING = "WARNING"
    ERROR = "ERROR"
    CRITICAL = "CRITICAL"
