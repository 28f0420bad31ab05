"""The bert-base-uncased WordPiece tokenizer of all-MiniLM-L6-v2, built offline.

Vocabulary source: `assets/vocab.txt`, vendored (231,508 bytes, Apache-2.0 like the model,
licence text beside it) and checked against a pinned sha256 at load. We vendor it rather than
depend on a package that ships it: the PyPI packages carrying all-MiniLM-L6-v2's tokenizer
files are 83 MB wheels with the fp32 weights that pull in sentence-transformers and PyTorch.
See assets/README.md for its origin. The settings below are those of the model's
`tokenizer.json` (the vocabulary is all it adds to them) with the 256-token limit of its
`sentence_bert_config.json`.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from tokenizers import AddedToken, Tokenizer
from tokenizers.models import WordPiece
from tokenizers.normalizers import BertNormalizer
from tokenizers.pre_tokenizers import BertPreTokenizer
from tokenizers.processors import TemplateProcessing

from episodic.embed.errors import EmbeddingError

VOCAB_PATH = Path(__file__).parent / "assets" / "vocab.txt"
VOCAB_SHA256 = "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3"
# sentence-transformers truncates all-MiniLM-L6-v2 input at 256 tokens (its tokenizer.json
# says 128, which sentence-transformers overrides); position embeddings would allow 512.
MAX_TOKENS = 256

PAD, UNK, CLS, SEP, MASK = "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"


def load_vocab(path: Path = VOCAB_PATH, sha256: str = VOCAB_SHA256) -> dict[str, int]:
    """Token -> id (the line number), after checking the file's hash."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise EmbeddingError(
            f"tokenizer vocabulary {path} is unreadable ({exc}); an installed episodic needs "
            "episodic/embed/assets/ in its package data"
        ) from exc
    digest = hashlib.sha256(data).hexdigest()
    if digest != sha256:
        raise EmbeddingError(
            f"tokenizer vocabulary {path} has sha256 {digest}, expected {sha256}; "
            "re-vendor it as described in episodic/embed/assets/README.md"
        )
    return {token: index for index, token in enumerate(data.decode("utf-8").splitlines())}


def bert_uncased_tokenizer(vocab: dict[str, int], max_tokens: int = MAX_TOKENS) -> Tokenizer:
    """`[CLS] wordpieces [SEP]`, truncated to `max_tokens`; no padding (the embedder pads
    each batch it forms)."""
    tokenizer = Tokenizer(WordPiece(vocab, unk_token=UNK, max_input_chars_per_word=100))
    # strip_accents=None means "strip when lower-casing", as in bert-base-uncased.
    tokenizer.normalizer = BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=True
    )
    tokenizer.pre_tokenizer = BertPreTokenizer()
    tokenizer.post_processor = TemplateProcessing(
        single=f"{CLS} $A {SEP}",
        pair=f"{CLS} $A {SEP} $B:1 {SEP}:1",
        special_tokens=[(CLS, vocab[CLS]), (SEP, vocab[SEP])],
    )
    # As in tokenizer.json: "[SEP]" typed in a text is the special token, not "[ sep ]".
    tokenizer.add_special_tokens(
        [AddedToken(token, special=True, normalized=False) for token in (PAD, UNK, CLS, SEP, MASK)]
    )
    tokenizer.enable_truncation(max_tokens)
    return tokenizer
