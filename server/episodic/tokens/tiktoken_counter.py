"""Offline token counting with tiktoken.

tiktoken downloads its BPE rank files on first use. Episodic must never touch the network
at run time, so we build `tiktoken.Encoding` ourselves from rank files vendored in `assets/`
(see assets/README.md), checked against the same sha256 pins tiktoken uses. No cache
directory, no environment variable, no URL is involved.
"""

from __future__ import annotations

import base64
import functools
import gzip
import hashlib
import threading
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

import tiktoken
from tiktoken.model import encoding_name_for_model

from episodic.errors import InvalidArgument

ASSETS_DIR = Path(__file__).parent / "assets"
DEFAULT_ENCODING = "cl100k_base"

_ENDOFTEXT = "<|endoftext|>"
_FIM_PREFIX = "<|fim_prefix|>"
_FIM_MIDDLE = "<|fim_middle|>"
_FIM_SUFFIX = "<|fim_suffix|>"
_ENDOFPROMPT = "<|endofprompt|>"


@dataclass(frozen=True, slots=True)
class _Spec:
    """What tiktoken_ext.openai_public builds for one encoding, minus the download."""

    sha256: str
    pat_str: str
    special_tokens: Mapping[str, int]


# pat_str and special tokens are copied verbatim from tiktoken 0.14.0's
# tiktoken_ext/openai_public.py, which offers no way to get them without loading the ranks
# over the network. tests/unit/test_tiktoken_counter.py compares them with tiktoken's own
# constructors, so a tiktoken upgrade that changes them fails loudly instead of miscounting.
_CL100K = _Spec(
    sha256="223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    pat_str=r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s""",
    special_tokens=MappingProxyType(
        {
            _ENDOFTEXT: 100257,
            _FIM_PREFIX: 100258,
            _FIM_MIDDLE: 100259,
            _FIM_SUFFIX: 100260,
            _ENDOFPROMPT: 100276,
        }
    ),
)

# One alternative per line, exactly as upstream writes them.
_O200K_PAT_PARTS = (
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""\p{N}{1,3}""",
    r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
    r"""\s*[\r\n]+""",
    r"""\s+(?!\S)""",
    r"""\s+""",
)

_O200K = _Spec(
    sha256="446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    pat_str="|".join(_O200K_PAT_PARTS),
    special_tokens=MappingProxyType({_ENDOFTEXT: 199999, _ENDOFPROMPT: 200018}),
)

_SPECS: Mapping[str, _Spec] = MappingProxyType({"cl100k_base": _CL100K, "o200k_base": _O200K})
SUPPORTED_ENCODINGS = frozenset(_SPECS)

# o200k_harmony (gpt-oss) has o200k_base's ranks and pattern and differs only in special
# tokens, which we never honour (disallowed_special=()), so its counts equal o200k_base's.
_SAME_COUNTS_AS = MappingProxyType({"o200k_harmony": "o200k_base"})


def verify_assets(assets_dir: Path = ASSETS_DIR) -> None:
    """Fail start-up early, with a clear message, if a vendored rank file is missing or altered."""
    for name in _SPECS:
        _read_verified(assets_dir, name)


def _read_verified(assets_dir: Path, name: str) -> bytes:
    path = assets_dir / f"{name}.tiktoken.gz"
    data = _decompress(path)
    digest = hashlib.sha256(data).hexdigest()
    if digest != _SPECS[name].sha256:
        raise RuntimeError(
            f"token asset {path} has sha256 {digest}, expected {_SPECS[name].sha256}; "
            "re-vendor it as described in episodic/tokens/assets/README.md"
        )
    return data


def _decompress(path: Path) -> bytes:
    try:
        return gzip.decompress(path.read_bytes())
    except (OSError, EOFError, zlib.error) as exc:  # BadGzipFile is an OSError
        raise RuntimeError(f"token asset {path} is missing or unreadable: {exc}") from exc


def _parse_ranks(data: bytes) -> dict[bytes, int]:
    """The .tiktoken format is one "base64(token) rank" pair per line.

    Parsed here rather than with tiktoken.load.load_tiktoken_bpe, which routes even local
    paths through its download cache and copies them into $TMPDIR/data-gym-cache.
    """
    pairs = (line.split() for line in data.splitlines() if line)
    return {base64.b64decode(token): int(rank) for token, rank in pairs}


@functools.cache  # immutable once verified: one copy per process, however many counters
def _build(assets_dir: Path, name: str) -> tiktoken.Encoding:
    spec = _SPECS[name]
    return tiktoken.Encoding(
        name,
        pat_str=spec.pat_str,
        mergeable_ranks=_parse_ranks(_read_verified(assets_dir, name)),
        special_tokens=dict(spec.special_tokens),
    )


class TiktokenCounter:
    """TokenCounter on tiktoken's BPE; each encoding is built once, on first use, from
    verified local bytes (a few hundred ms each, so we do not pay for unused ones)."""

    def __init__(self, assets_dir: Path = ASSETS_DIR) -> None:
        self._assets_dir = assets_dir
        self._lock = threading.Lock()
        self._encodings: dict[str, tiktoken.Encoding] = {}

    def warm(self) -> None:
        """Builds every encoding now (about 0.5 s for both): a server calls this off the event
        loop at start-up, so the first turn after a restart does not wait for it."""
        for name in _SPECS:
            self.encoding(name)

    def supported_encodings(self) -> frozenset[str]:
        return SUPPORTED_ENCODINGS

    def encoding_for_model(self, model: str) -> str:
        try:
            name = encoding_name_for_model(model)
        except KeyError:  # tiktoken's answer for models it does not know, including ""
            return DEFAULT_ENCODING
        name = _SAME_COUNTS_AS.get(name, name)
        return name if name in _SPECS else DEFAULT_ENCODING

    def known_model_encoding(self, model: str) -> str | None:
        """The encoding of a model tiktoken knows; None for models it does not."""
        try:
            name = encoding_name_for_model(model)
        except KeyError:
            return None
        return _SAME_COUNTS_AS.get(name, name)

    def count(self, text: str, encoding: str) -> int:
        return len(self.encode(text, encoding))

    def prefix(self, text: str, tokens: int, encoding: str) -> str:
        if tokens <= 0:
            return ""
        ids = self.encode(text, encoding)
        if len(ids) <= tokens:
            return text
        # Tokens are bytes: the first `tokens` may end inside a character; it is left out.
        return self.encoding(encoding).decode_bytes(ids[:tokens]).decode("utf-8", "ignore")

    def encode(self, text: str, encoding: str) -> list[int]:
        # disallowed_special=() makes "<|endoftext|>" in user text plain text, not an error.
        bpe = self.encoding(encoding)
        if len(text) <= CHUNK_CHARS:
            return bpe.encode(text, disallowed_special=())
        return [token for chunk in chunks(text) for token in bpe.encode(chunk, disallowed_special=())]

    def encoding(self, name: str) -> tiktoken.Encoding:
        if name not in _SPECS:
            raise InvalidArgument.of(
                "token_encoding",
                f"unsupported token encoding {name!r}; supported: {', '.join(sorted(_SPECS))}",
            )
        cached = self._encodings.get(name)
        return cached if cached is not None else self._load(name)

    def _load(self, name: str) -> tiktoken.Encoding:
        # Double-checked under the lock so concurrent first calls build the encoding once.
        with self._lock:
            if name not in self._encodings:
                self._encodings[name] = _build(self._assets_dir, name)
            return self._encodings[name]


# BPE merges within one pre-tokenized piece cost more than linear time in its length (about
# 45x for 16x the length of one giant "word"), so long texts are encoded in chunks.
CHUNK_CHARS = 8192


def chunks(text: str, size: int = CHUNK_CHARS) -> Iterator[str]:
    """`text` in pieces of at most `size` characters, each cut before a space or tab that
    follows a non-space: no pre-tokenized piece of either encoding spans such a point (unlike a
    line break, which a run of punctuation takes in), so the tokens are exactly those of the
    whole text. Only a stretch of `size / 2` with no such point (one giant word or run of
    symbols) is cut where it reaches `size`, which may add a token per cut."""
    start = 0
    while len(text) - start > size:
        cut = _last_cut(text, start + size // 2, start + size)
        yield text[start:cut]
        start = cut
    yield text[start:]


def _last_cut(text: str, low: int, high: int) -> int:
    """The last space or tab in (low, high) after a non-space, else `high`."""
    end = high
    while (blank := max(text.rfind(" ", low, end), text.rfind("\t", low, end))) > low:
        if not text[blank - 1].isspace():
            return blank
        end = blank
    return high
