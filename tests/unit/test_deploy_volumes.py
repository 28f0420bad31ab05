"""Where the deploy files keep what must survive a container: every replica of
deploy/compose.yaml and of the Kubernetes Deployment sets EPISODIC_ERASURE_LEDGER to one
file on one volume they all mount (compose: a named volume; Kubernetes: a ReadWriteMany
claim), deploy/compose.single.yaml runs one server on SQLite with its database and its
default ledger on one volume, and a server without a ledger says so in a WARNING."""

from __future__ import annotations

import logging
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml

from episodic.bootstrap.adapters import build_ledger
from episodic.config import OPTIONS, Settings
from episodic.config.concerns import DatabaseSettings
from episodic.store.ledger import FileErasureLedger, NoErasureLedger, ledger_path
from episodic.store.sqlite_files import sqlite_file

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "deploy" / "compose.yaml"
SINGLE = ROOT / "deploy" / "compose.single.yaml"
KUBERNETES = ROOT / "deploy" / "kubernetes" / "episodic.yaml"
LEDGER = "EPISODIC_ERASURE_LEDGER"
KNOWN_VARIABLES = {option.env for option in OPTIONS}


def load(path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(path.read_text())
    return loaded


def servers(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The services that run `episodic serve` (the image's default command)."""
    services: dict[str, dict[str, Any]] = compose["services"]
    return {
        name: service
        for name, service in services.items()
        if str(service.get("image", "")).startswith("episodic")
        and service.get("command", ["episodic", "serve"])[:2] == ["episodic", "serve"]
    }


def mounts(service: dict[str, Any]) -> list[tuple[str, PurePosixPath, bool]]:
    """(source, target, read_only) of each of a compose service's volumes, short or long form."""
    found = []
    for volume in service.get("volumes", []):
        if isinstance(volume, str):
            source, target, *mode = volume.split(":")
            read_only = "ro" in (mode[0].split(",") if mode else [])
        else:
            source, target = volume.get("source", ""), volume["target"]
            read_only = volume.get("read_only", False)
        found.append((source, PurePosixPath(target), bool(read_only)))
    return found


def named_volume_holding(compose: dict[str, Any], service: dict[str, Any], file: PurePosixPath) -> str:
    """The compose named volume whose mount holds `file`, writable: fails the test if none."""
    holding = [m for m in mounts(service) if file.is_relative_to(m[1]) and not m[2]]
    assert holding, f"{file} is on no writable volume of {service.get('volumes')}"
    source, _, _ = max(holding, key=lambda m: len(m[1].parts))  # the innermost mount wins
    assert source in (compose.get("volumes") or {}), f"{source} is not a named volume of the file"
    return source


def test_every_compose_replica_shares_one_ledger_on_one_named_volume() -> None:
    compose = load(COMPOSE)
    replicas = servers(compose)
    assert len(replicas) == 3
    shared = set()
    for name, service in replicas.items():
        setting = service["environment"].get(LEDGER, "")
        assert setting, f"{name} sets no {LEDGER}"
        assert ledger_path(setting, service["environment"]["EPISODIC_DATABASE_URL"]) == Path(setting)
        file = PurePosixPath(setting)
        assert file.is_absolute()
        shared.add((named_volume_holding(compose, service, file), file))
    assert len(shared) == 1, f"the replicas' ledgers differ: {shared}"


def kubernetes() -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(KUBERNETES.read_text()) if doc is not None]


def test_every_kubernetes_replica_shares_one_ledger_on_a_read_write_many_claim() -> None:
    manifests = kubernetes()
    (deployment,) = [m for m in manifests if m["kind"] == "Deployment"]
    assert deployment["spec"]["replicas"] > 1
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    env = {e["name"]: e for e in container["env"]}
    file = PurePosixPath(env[LEDGER]["value"])  # a plain value: the same for every pod
    assert file.is_absolute()
    holding = [
        m
        for m in container["volumeMounts"]
        if file.is_relative_to(m["mountPath"]) and not m.get("readOnly", False) and not m.get("subPathExpr")
    ]
    assert holding, f"{file} is on no writable volume mount"
    (mount,) = holding
    (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    claim_name = volume["persistentVolumeClaim"]["claimName"]  # not emptyDir: one for all pods
    (claim,) = [
        m for m in manifests if m["kind"] == "PersistentVolumeClaim" and m["metadata"]["name"] == claim_name
    ]
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
    assert pod["securityContext"]["fsGroup"] == pod["securityContext"]["runAsUser"]  # writable by the server


def test_the_kubernetes_file_says_the_claim_needs_shared_storage() -> None:
    header = KUBERNETES.read_text().split("\n---", 1)[0]
    assert "ReadWriteMany" in header and "NFS" in header


def test_the_single_container_runs_one_server_on_sqlite_with_its_ledger_on_its_volume() -> None:
    single = load(SINGLE)
    assert list(single["services"]) == list(servers(single)), "one service, and it is the server"
    (service,) = servers(single).values()
    env = service["environment"]
    database = sqlite_file(env["EPISODIC_DATABASE_URL"])
    assert database is not None and database.is_absolute(), "a SQLite file, not PostgreSQL or :memory:"
    ledger = ledger_path(env.get(LEDGER, ""), env["EPISODIC_DATABASE_URL"])
    assert ledger is not None
    volume = named_volume_holding(single, service, PurePosixPath(database))
    assert named_volume_holding(single, service, PurePosixPath(ledger)) == volume
    assert "--migrate-on-start" in service["command"]  # one process owns the file: it may migrate
    assert service.get("scale", 1) == 1 and service.get("deploy", {}).get("replicas", 1) == 1
    assert service["healthcheck"]["test"] == ["CMD", "episodic", "healthcheck"]
    assert service["image"] == next(iter(servers(load(COMPOSE)).values()))["image"]
    assert set(env) <= KNOWN_VARIABLES, set(env) - KNOWN_VARIABLES
    assert single["name"] != load(COMPOSE)["name"], "its own project: not mixed with the replicas'"
    assert f"docker compose -f deploy/{SINGLE.name} up" in (ROOT / "docs" / "deployment.md").read_text()


def database(url: str, erasure_ledger: str = "") -> DatabaseSettings:
    return DatabaseSettings.of(Settings(database_url=url, erasure_ledger=erasure_ledger))


NO_LEDGER = "no erasure ledger"


@pytest.mark.parametrize("url", ["postgresql://episodic@127.0.0.1:5432/episodic", "sqlite:///:memory:"])
def test_no_ledger_is_a_warning(url: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="episodic")
    assert isinstance(build_ledger(database(url)), NoErasureLedger)
    (record,) = [r for r in caplog.records if r.getMessage().startswith(NO_LEDGER)]
    assert record.levelno == logging.WARNING
    assert LEDGER in record.getMessage()


def test_a_sqlite_file_or_a_set_ledger_says_nothing(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="episodic")
    beside = build_ledger(database(f"sqlite:///{tmp_path / 'episodic.db'}"))
    named = build_ledger(database("postgresql://episodic@127.0.0.1/e", str(tmp_path / "erasures.jsonl")))
    assert isinstance(beside, FileErasureLedger)
    assert beside.where == str(tmp_path / "episodic.db.erasures.jsonl")
    assert isinstance(named, FileErasureLedger) and named.where == str(tmp_path / "erasures.jsonl")
    assert not [r for r in caplog.records if r.getMessage().startswith(NO_LEDGER)]
