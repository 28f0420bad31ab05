"""settings.embedder_threads reaches the local model's onnxruntime session (the real
MiniLM, loaded through the composition root)."""

from __future__ import annotations

import dataclasses

import pytest

from episodic.bootstrap import adapters as bootstrap
from episodic.config import EmbedderKind, Settings
from episodic.config.concerns import ModelSettings
from episodic.embed import MiniLmEmbedder


@pytest.mark.parametrize("kind", [EmbedderKind.MINILM, EmbedderKind.MINILM_FP32])
def test_the_embedder_threads_setting_is_each_local_model_calls_onnxruntime_threads(
    kind: EmbedderKind,
) -> None:
    base = Settings(embedder=kind)
    for threads in (1, 2):
        settings = dataclasses.replace(base, embedder_threads=threads)
        embedder = bootstrap.build_embedder(ModelSettings.of(settings))
        assert isinstance(embedder, MiniLmEmbedder)
        assert embedder.threads == threads


def test_one_thread_a_call_is_the_default() -> None:
    assert Settings().embedder_threads == 1
