"""The deployment files parse and say what docs/deployment.md promises (no container
engine or cluster runs here): compose runs PostgreSQL, a one-shot migration and three
replicas of one image with health checks; the Kubernetes manifest has a migration Job, a
Deployment of three probed by gRPC health on the server's port and a headless Service;
every EPISODIC_* variable they set exists; the service config shown in the docs is the
client's."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

from episodic.config import OPTIONS, Settings
from episodic_client.service_config import service_config

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "deploy" / "compose.yaml"
KUBERNETES = ROOT / "deploy" / "kubernetes" / "episodic.yaml"
DOCS = ROOT / "docs" / "deployment.md"
PORT = int(Settings().address.rpartition(":")[2])  # 50051
KNOWN_VARIABLES = {option.env for option in OPTIONS}


def compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    return loaded


def manifests() -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(KUBERNETES.read_text()) if doc is not None]


def of_kind(kind: str) -> dict[str, Any]:
    (found,) = [m for m in manifests() if m["kind"] == kind]
    return found


def replicas_in_compose() -> dict[str, dict[str, Any]]:
    services: dict[str, dict[str, Any]] = compose()["services"]
    return {name: s for name, s in services.items() if name.startswith("episodic-")}


def server_container() -> dict[str, Any]:
    (container,) = of_kind("Deployment")["spec"]["template"]["spec"]["containers"]
    found: dict[str, Any] = container
    return found


def test_compose_runs_three_replicas_of_one_image_on_postgres() -> None:
    replicas = replicas_in_compose()
    assert len(replicas) == 3
    assert len({s["image"] for s in replicas.values()}) == 1
    for service in replicas.values():
        url = service["environment"]["EPISODIC_DATABASE_URL"]
        assert url.startswith("postgresql://") and "@postgres:" in url
        assert service["healthcheck"]["test"] == ["CMD", "episodic", "healthcheck"]
        assert service["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
        assert service["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert len({s["ports"][0] for s in replicas.values()}) == 3  # one host port each


def test_compose_migrates_once_before_the_replicas_start() -> None:
    services = compose()["services"]
    assert "healthcheck" in services["postgres"]
    migrate = services["migrate"]
    assert migrate["command"] == ["episodic", "migrate"]
    assert migrate["image"] == next(iter(replicas_in_compose().values()))["image"]
    assert migrate["restart"] == "no"


def test_the_kubernetes_manifest_is_a_list_of_objects() -> None:
    for manifest in manifests():
        assert {"apiVersion", "kind", "metadata"} <= manifest.keys()
        assert manifest["metadata"]["name"]
    assert {m["kind"] for m in manifests()} >= {"Job", "Deployment", "Service"}


def test_the_service_is_headless_on_the_server_port() -> None:
    spec = of_kind("Service")["spec"]
    assert spec["clusterIP"] == "None"
    assert [p["port"] for p in spec["ports"]] == [PORT]
    labels = of_kind("Deployment")["spec"]["template"]["metadata"]["labels"]
    assert spec["selector"].items() <= labels.items()


def test_the_deployment_runs_three_replicas_ready_by_grpc_health() -> None:
    deployment = of_kind("Deployment")
    assert deployment["spec"]["replicas"] == 3
    container = server_container()
    assert container["readinessProbe"]["grpc"]["port"] == PORT
    assert container["startupProbe"]["grpc"]["port"] == PORT
    assert [p["containerPort"] for p in container["ports"]] == [PORT]
    grace = float(_env(container)["EPISODIC_SHUTDOWN_GRACE_SECONDS"]["value"])
    assert deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] > grace


def test_secrets_come_from_secret_references_not_the_file() -> None:
    env = _env(server_container())
    assert "secretKeyRef" in env["EPISODIC_DATABASE_URL"]["valueFrom"]
    volumes = of_kind("Deployment")["spec"]["template"]["spec"]["volumes"]
    assert any("secret" in v for v in volumes)
    assert "EPISODIC_API_KEYS" not in env  # keys only as a mounted file


def test_the_migration_job_runs_episodic_migrate() -> None:
    (container,) = of_kind("Job")["spec"]["template"]["spec"]["containers"]
    assert container["command"] == ["episodic", "migrate"]
    assert container["image"] == server_container()["image"]


def test_every_variable_set_is_a_setting() -> None:
    used = set(_env(server_container()))
    for service in compose()["services"].values():
        used |= set(service.get("environment", {}))
    episodic = {name for name in used if name.startswith("EPISODIC_")}
    assert episodic and episodic <= KNOWN_VARIABLES, episodic - KNOWN_VARIABLES


def test_the_service_config_in_the_docs_is_the_clients() -> None:
    text = DOCS.read_text()
    blocks = re.findall(r"```json\n(.*?)\n```", text, flags=re.DOTALL)
    assert [json.loads(b) for b in blocks] == [service_config()]


def _env(container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in container["env"]}
