"""The Kubernetes manifest builds with `kubectl kustomize` (a process; offline, no cluster).
The files' other checks are in tests/unit/test_deployment_files.py."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.unit.test_deployment_files import KUBERNETES, manifests


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kubectl_builds_the_manifest_offline(tmp_path: Path) -> None:
    """`kubectl kustomize` needs no cluster: it decodes every object (kind, name)."""
    shutil.copy(KUBERNETES, tmp_path / "episodic.yaml")
    (tmp_path / "kustomization.yaml").write_text("resources:\n- episodic.yaml\n")
    built = subprocess.run(
        ["kubectl", "kustomize", str(tmp_path)], capture_output=True, text=True, timeout=60, check=False
    )
    assert built.returncode == 0, built.stderr
    assert {d["kind"] for d in yaml.safe_load_all(built.stdout)} == {m["kind"] for m in manifests()}
