"""MiniLmEmbedder's int8 graph through its disk cache, with the real model: derived once,
then loaded from the cache without the quantizer, giving the same vectors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from episodic.embed import minilm
from episodic.embed.minilm import MODEL_SHA256, MiniLmEmbedder
from episodic.embed.quantize import recipe

TEXTS = ["How do I reset my password?", "The meeting was moved to Thursday afternoon."]


def test_the_int8_graph_is_derived_once_then_loaded_from_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = MiniLmEmbedder(cache_dir=tmp_path)
    (description,) = tmp_path.glob("*.json")
    entry = json.loads(description.read_text())
    assert (entry["source_sha256"], entry["recipe"]) == (MODEL_SHA256, recipe())
    assert description.with_suffix(".onnx").stat().st_size == entry["bytes"]

    def no_quantizer(model: bytes) -> bytes:
        raise AssertionError("the cached graph should have been used")

    monkeypatch.setattr(minilm, "dynamic_int8", no_quantizer)
    minilm._int8_of.cache_clear()  # the per-process memo would hide the disk
    second = MiniLmEmbedder(cache_dir=tmp_path)
    assert second.model_id == first.model_id
    assert second.embed(TEXTS) == first.embed(TEXTS)
