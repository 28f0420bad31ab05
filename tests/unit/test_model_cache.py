"""The cache of derived models (episodic.embed.model_cache): a verified copy is loaded without
deriving; anything that fails a check (altered graph, another source or recipe, a broken
description) is derived again and rewritten; an unusable directory costs speed, not the start."""

from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path

import pytest

from episodic.embed import minilm
from episodic.embed.model_cache import Derivation, default_cache_dir, load_or_derive, write_atomically

SOURCE = b"the fp32 model"
SOURCE_SHA = hashlib.sha256(SOURCE).hexdigest()
RECIPE = "reverse v1"


class CountingDerive:
    """A stand-in for the quantizer: the source reversed, counting its calls."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, source: bytes) -> bytes:
        self.calls += 1
        return source[::-1]


def derivation(derive: CountingDerive, *, source_sha: str = SOURCE_SHA, recipe: str = RECIPE) -> Derivation:
    return Derivation("model-int8", SOURCE, source_sha, recipe, derive)


def files(directory: Path) -> tuple[Path, Path]:
    return directory / "model-int8.onnx", directory / "model-int8.json"


def test_a_first_load_derives_and_caches_the_graph_with_both_checksums(tmp_path: Path) -> None:
    derive = CountingDerive()
    assert load_or_derive(derivation(derive), tmp_path / "cache") == SOURCE[::-1]
    graph, description = files(tmp_path / "cache")
    assert derive.calls == 1
    assert graph.read_bytes() == SOURCE[::-1]
    assert json.loads(description.read_text()) == {
        "source_sha256": SOURCE_SHA,
        "recipe": RECIPE,
        "sha256": hashlib.sha256(SOURCE[::-1]).hexdigest(),
        "bytes": len(SOURCE),
    }
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == ["model-int8.json", "model-int8.onnx"]


def test_a_good_cache_is_loaded_without_deriving(tmp_path: Path) -> None:
    load_or_derive(derivation(CountingDerive()), tmp_path)
    derive = CountingDerive()
    assert load_or_derive(derivation(derive), tmp_path) == SOURCE[::-1]
    assert derive.calls == 0


def test_a_tampered_graph_is_derived_again_and_rewritten(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    load_or_derive(derivation(CountingDerive()), tmp_path)
    graph, _ = files(tmp_path)
    graph.write_bytes(b"ledom 23pf ehT")  # same length, one byte changed
    derive = CountingDerive()
    with caplog.at_level(logging.INFO, "episodic.embed"):
        assert load_or_derive(derivation(derive), tmp_path) == SOURCE[::-1]
    assert derive.calls == 1
    assert graph.read_bytes() == SOURCE[::-1]
    (record,) = caplog.records
    assert (record.levelno, record.__dict__["reason"]) == (logging.WARNING, "checksum mismatch")
    assert load_or_derive(derivation(CountingDerive()), tmp_path) == SOURCE[::-1]  # rewritten whole


def test_a_truncated_graph_is_derived_again(tmp_path: Path) -> None:
    load_or_derive(derivation(CountingDerive()), tmp_path)
    graph, _ = files(tmp_path)
    graph.write_bytes(graph.read_bytes()[:5])
    derive = CountingDerive()
    load_or_derive(derivation(derive), tmp_path)
    assert derive.calls == 1


def test_another_source_checksum_is_derived_again(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    load_or_derive(derivation(CountingDerive(), source_sha="0" * 64), tmp_path)
    derive = CountingDerive()
    with caplog.at_level(logging.INFO, "episodic.embed"):
        load_or_derive(derivation(derive), tmp_path)
    assert derive.calls == 1
    (record,) = caplog.records
    assert (record.levelno, record.__dict__["reason"]) == (logging.INFO, "source model changed")
    assert json.loads(files(tmp_path)[1].read_text())["source_sha256"] == SOURCE_SHA


def test_another_recipe_is_derived_again(tmp_path: Path) -> None:
    load_or_derive(derivation(CountingDerive(), recipe="reverse v0"), tmp_path)
    derive = CountingDerive()
    load_or_derive(derivation(derive), tmp_path)
    assert derive.calls == 1


@pytest.mark.parametrize("description", [b"", b"{not json", b"[1, 2]", b'{"source_sha256": 1}'])
def test_a_broken_description_is_derived_again(tmp_path: Path, description: bytes) -> None:
    load_or_derive(derivation(CountingDerive()), tmp_path)
    files(tmp_path)[1].write_bytes(description)
    derive = CountingDerive()
    assert load_or_derive(derivation(derive), tmp_path) == SOURCE[::-1]
    assert derive.calls == 1


def test_a_graph_without_its_description_is_not_trusted(tmp_path: Path) -> None:
    """A crash after the graph's rename, before its description's."""
    graph, _ = files(tmp_path)
    graph.write_bytes(SOURCE[::-1])
    derive = CountingDerive()
    load_or_derive(derivation(derive), tmp_path)
    assert derive.calls == 1


def test_an_unwritable_directory_derives_in_memory_with_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "a-file").write_text("")
    directory = tmp_path / "a-file" / "cache"  # cannot be created: its parent is a file
    derive = CountingDerive()
    with caplog.at_level(logging.INFO, "episodic.embed"):
        assert load_or_derive(derivation(derive), directory) == SOURCE[::-1]
    assert derive.calls == 1
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1
    assert warnings[0].getMessage().startswith("cannot cache the int8 embedding model")
    assert warnings[0].__dict__["cache"] == str(directory)


def test_no_directory_derives_in_memory_silently(caplog: pytest.LogCaptureFixture) -> None:
    derive = CountingDerive()
    with caplog.at_level(logging.DEBUG):
        assert load_or_derive(derivation(derive), None) == SOURCE[::-1]
    assert derive.calls == 1
    assert caplog.records == []


def test_a_failed_derivation_caches_nothing(tmp_path: Path) -> None:
    def failing(source: bytes) -> bytes:
        raise RuntimeError("quantizer broke")

    with pytest.raises(RuntimeError):
        load_or_derive(Derivation("model-int8", SOURCE, SOURCE_SHA, RECIPE, failing), tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_a_write_that_fails_midway_leaves_the_old_file_and_no_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "model.onnx"
    target.write_bytes(b"old")

    def crash(source: object, destination: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="No space left on device"):
        write_atomically(target, b"new")
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["model.onnx"]


def test_write_atomically_replaces_the_whole_file(tmp_path: Path) -> None:
    target = tmp_path / "model.onnx"
    target.write_bytes(b"a much longer old content")
    write_atomically(target, b"new")
    assert target.read_bytes() == b"new"
    assert [p.name for p in tmp_path.iterdir()] == ["model.onnx"]


def test_the_default_directory_follows_xdg_cache_home_when_absolute(tmp_path: Path) -> None:
    assert default_cache_dir(str(tmp_path), home=Path("/home/x")) == tmp_path / "episodic" / "models"
    assert default_cache_dir("relative/dir", home=Path("/home/x")) == Path("/home/x/.cache/episodic/models")
    assert default_cache_dir("", home=Path("/home/x")) == Path("/home/x/.cache/episodic/models")


def test_no_home_means_no_default_directory(monkeypatch: pytest.MonkeyPatch) -> None:
    def homeless() -> Path:
        raise RuntimeError("Could not determine home directory.")

    monkeypatch.setattr(Path, "home", staticmethod(homeless))
    assert default_cache_dir() is None
    assert os.fspath(default_cache_dir("/var/cache") or "") == "/var/cache/episodic/models"


def test_minilm_without_a_home_derives_in_memory_with_one_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def homeless() -> Path:
        raise RuntimeError("Could not determine home directory.")

    monkeypatch.setattr(Path, "home", staticmethod(homeless))
    with caplog.at_level(logging.INFO, "episodic.embed"):
        assert minilm._cache_directory(minilm.USER_CACHE) is None
    assert [r.levelno for r in caplog.records] == [logging.WARNING]
    assert minilm._cache_directory(None) is None
    assert minilm._cache_directory(Path("/somewhere")) == Path("/somewhere")
