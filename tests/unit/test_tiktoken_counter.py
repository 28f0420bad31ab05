"""TiktokenCounter: offline, verified, and id-for-id identical to tiktoken's own encodings."""

from __future__ import annotations

import gzip
import hashlib
import os
import shutil
import socket
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import tiktoken
import tiktoken.load
from tiktoken_ext import openai_public

from episodic.errors import InvalidArgument
from episodic.tokens import ASSETS_DIR, TiktokenCounter, verify_assets
from tests.fakes_tokens import WordTokenCounter

ENCODINGS = ("cl100k_base", "o200k_base")
# tiktoken's cache file name is sha1(url); these are the names the brief pinned.
CACHE_NAMES = {
    "cl100k_base": "9b5ad71b2ce5302211f9c61530b329a4922fc6a4",
    "o200k_base": "fb374d419588a4632f3f557e76b4b70aebbca790",
}
SAMPLE = "Episodic stores what the agent said — and when. 日本語のテキスト 🙂 x = f(42) + 1234567"
# o200k_base ids of SAMPLE, produced by tiktoken.get_encoding("o200k_base") from the
# pinned rank file (computed once; test_matches_tiktoken_constructors re-derives them).
SAMPLE_O200K_IDS = [
    36, 15463, 368, 291, 14604, 1412, 290, 11793, 2059, 2733, 326, 1261, 13, 17428, 40909,
    3385, 16056, 18368, 38236, 26192, 1215, 314, 285, 7, 4689, 8, 659, 220, 7633, 19354, 22,
]  # fmt: skip
TEXTS = [
    "",
    "Hello episodic memory!",
    SAMPLE,
    "I'm sure they'll say it's THEIR'S.\r\n\r\n  indented\tcode()  \n",
    "<|endoftext|> and <|fim_prefix|><|endofprompt|> are just text here",
    "Zürich, Ελληνικά, русский, العربية, हिन्दी, 한국어 👩‍👩‍👧 1,000,000.5",
]


@pytest.fixture(scope="module")
def counter() -> TiktokenCounter:
    return TiktokenCounter()


def _no_download(blobpath: str) -> bytes:
    raise AssertionError(f"attempted to download {blobpath}")


@pytest.fixture(scope="module")
def official(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """tiktoken's own constructor output, fed our vendored bytes through its cache.

    tiktoken re-checks the bytes against its own sha256 pins, and downloads are made to fail.
    """
    cache = tmp_path_factory.mktemp("tiktoken-cache")
    for name in ENCODINGS:
        url = f"https://openaipublic.blob.core.windows.net/encodings/{name}.tiktoken"
        assert hashlib.sha1(url.encode()).hexdigest() == CACHE_NAMES[name]
        data = gzip.decompress((ASSETS_DIR / f"{name}.tiktoken.gz").read_bytes())
        (cache / CACHE_NAMES[name]).write_bytes(data)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TIKTOKEN_CACHE_DIR", str(cache))
        mp.setattr(tiktoken.load, "read_file", _no_download)
        names = (*ENCODINGS, "o200k_harmony")
        return {name: openai_public.ENCODING_CONSTRUCTORS[name]() for name in names}


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise OSError("network disabled in this test")

    monkeypatch.setattr(socket, "socket", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(tiktoken.load, "read_file", _no_download)
    monkeypatch.delenv("TIKTOKEN_CACHE_DIR", raising=False)


def test_cl100k_ids_match_reference(counter: TiktokenCounter) -> None:
    text = "Hello episodic memory!"
    assert counter.encode(text, "cl100k_base") == [9906, 67594, 53860, 5044, 0]
    assert counter.count(text, "cl100k_base") == 5


def test_o200k_counts_sample(counter: TiktokenCounter) -> None:
    assert counter.encode(SAMPLE, "o200k_base") == SAMPLE_O200K_IDS
    assert counter.count(SAMPLE, "o200k_base") == 31


@pytest.mark.parametrize("name", ENCODINGS)
def test_matches_tiktoken_constructors(
    counter: TiktokenCounter, official: dict[str, dict[str, Any]], name: str
) -> None:
    ours, theirs = counter.encoding(name), official[name]
    # Private attributes on purpose: if tiktoken renames them or changes the copied
    # pat_str/special tokens, this must fail so the copy in tiktoken_counter.py is redone.
    assert ours._pat_str == theirs["pat_str"]
    assert ours._special_tokens == theirs["special_tokens"]
    assert ours._mergeable_ranks == theirs["mergeable_ranks"]
    reference = tiktoken.Encoding(**theirs)
    for text in TEXTS:
        assert counter.encode(text, name) == reference.encode(text, disallowed_special=())


def test_o200k_harmony_counts_like_o200k_base(
    counter: TiktokenCounter, official: dict[str, dict[str, Any]]
) -> None:
    harmony = tiktoken.Encoding(**official["o200k_harmony"])
    for text in [*TEXTS, "<|start|>assistant<|channel|>final<|message|>hi<|end|>"]:
        assert counter.encode(text, "o200k_base") == harmony.encode(text, disallowed_special=())


@pytest.mark.parametrize("model", ["gpt-4o", "gpt-4o-mini", "gpt-4.1", "o3", "gpt-oss-120b"])
def test_newer_models_use_o200k(counter: TiktokenCounter, model: str) -> None:
    assert counter.encoding_for_model(model) == "o200k_base"


@pytest.mark.parametrize("model", ["gpt-4", "gpt-3.5-turbo", "unknown-model", "", "text-davinci-003"])
def test_other_models_fall_back_to_cl100k(counter: TiktokenCounter, model: str) -> None:
    assert counter.encoding_for_model(model) == "cl100k_base"


def test_supported_encodings(counter: TiktokenCounter) -> None:
    assert counter.supported_encodings() == frozenset(ENCODINGS)
    for model in ["gpt-4o", "gpt-4", "whatever"]:
        assert counter.encoding_for_model(model) in counter.supported_encodings()


@pytest.mark.parametrize("name", ENCODINGS)
def test_special_token_text_is_counted_not_rejected(counter: TiktokenCounter, name: str) -> None:
    special_ids = set(counter.encoding(name)._special_tokens.values())
    ids = counter.encode("<|endoftext|><|endofprompt|>", name)
    assert len(ids) > 2
    assert special_ids.isdisjoint(ids)


def test_lone_surrogate_does_not_raise(counter: TiktokenCounter) -> None:
    assert counter.count("broken \ud800 text", "cl100k_base") > 0


@pytest.mark.parametrize("name", ["p50k_base", "", "CL100K_BASE", "o200k_harmony"])
def test_unknown_encoding_is_invalid_argument(counter: TiktokenCounter, name: str) -> None:
    with pytest.raises(InvalidArgument) as caught:
        counter.count("hi", name)
    [violation] = caught.value.violations
    assert violation.field == "token_encoding"
    assert "cl100k_base" in violation.description
    assert "o200k_base" in violation.description


def test_shipped_assets_verify() -> None:
    verify_assets()


def _copy_assets(tmp_path: Path) -> Path:
    return Path(shutil.copytree(ASSETS_DIR, tmp_path / "assets"))


def test_corrupted_asset_is_detected(tmp_path: Path) -> None:
    assets = _copy_assets(tmp_path)
    path = assets / "o200k_base.tiktoken.gz"
    data = bytearray(gzip.decompress(path.read_bytes()))
    data[100] ^= 0x01  # valid gzip, wrong content: only the hash can catch it
    path.write_bytes(gzip.compress(bytes(data)))
    with pytest.raises(RuntimeError, match=r"o200k_base\.tiktoken\.gz has sha256 .* expected"):
        verify_assets(assets)
    with pytest.raises(RuntimeError, match="sha256"):
        TiktokenCounter(assets).count("hi", "o200k_base")
    assert TiktokenCounter(assets).count("hi", "cl100k_base") == 1


def test_unreadable_or_missing_asset_is_detected(tmp_path: Path) -> None:
    assets = _copy_assets(tmp_path)
    (assets / "cl100k_base.tiktoken.gz").write_bytes(b"not gzip at all")
    with pytest.raises(RuntimeError, match=r"cl100k_base\.tiktoken\.gz is missing or unreadable"):
        verify_assets(assets)
    (assets / "cl100k_base.tiktoken.gz").unlink()
    with pytest.raises(RuntimeError, match="missing or unreadable"):
        verify_assets(assets)


@pytest.mark.usefixtures("no_network")
def test_counts_without_network_or_environment_changes() -> None:
    environ = dict(os.environ)
    fresh = TiktokenCounter()
    assert fresh.count("Hello episodic memory!", "cl100k_base") == 5
    assert fresh.count(SAMPLE, "o200k_base") == 31
    assert dict(os.environ) == environ


def test_concurrent_first_use_builds_each_encoding_once() -> None:
    fresh = TiktokenCounter()
    with ThreadPoolExecutor(max_workers=8) as pool:
        built = list(pool.map(lambda _: fresh.encoding("cl100k_base"), range(16)))
    assert all(enc is built[0] for enc in built)


def test_word_fake_follows_the_same_contract() -> None:
    fake = WordTokenCounter()
    assert fake.supported_encodings() == frozenset(ENCODINGS)
    assert fake.count("  three  little words\n", "cl100k_base") == 3
    assert fake.encoding_for_model("gpt-4o-mini") == "o200k_base"
    assert fake.encoding_for_model("") == "cl100k_base"
    with pytest.raises(InvalidArgument):
        fake.count("hi", "p50k_base")


def test_warming_builds_every_encoding_once_per_process() -> None:
    first, second = TiktokenCounter(), TiktokenCounter()
    first.warm()
    assert all(second.encoding(name) is first.encoding(name) for name in first.supported_encodings())


@pytest.mark.parametrize("encoding", ["cl100k_base", "o200k_base"])
def test_a_prefix_of_n_tokens_ends_on_a_token_boundary_and_a_whole_character(encoding: str) -> None:
    counter = TiktokenCounter()
    texts = [
        "The quick brown fox jumps over the lazy dog. " * 20,
        "日本語のテキストは空白なしで続きます。" * 30,
        "emoji 👩‍👩‍👧‍👦 and accents: café naïve façade " * 15,
        "x" * 20_000,
    ]
    for text in texts:
        whole = counter.encode(text, encoding)
        for n in (0, 1, 7, 33, 120, len(whole) + 5):
            start = counter.prefix(text, n, encoding)
            assert text.startswith(start)
            ids = counter.encode(start, encoding)
            assert len(ids) <= n
            if n >= len(whole):
                assert start == text
