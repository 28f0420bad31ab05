"""The views of the settings each edge and factory takes (episodic.config.concerns): every
field that is one setting carries its value under its name, and the dev tenant is set only
under --insecure-dev."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from episodic.config import Settings
from episodic.config import concerns as c

VIEWS = (
    c.CallerSettings,
    c.GrpcSettings,
    c.TlsSettings,
    c.InspectorSettings,
    c.McpSettings,
    c.DatabaseSettings,
    c.ModelSettings,
    c.CacheSettings,
    c.TelemetrySettings,
)
DERIVED = {"dev_tenant", "http"}  # not one setting each (CallerSettings' dev_tenant is one)
SETTINGS = {f.name for f in dataclasses.fields(Settings)}


@pytest.mark.parametrize("view", VIEWS, ids=[v.__name__ for v in VIEWS])
def test_each_field_of_a_view_is_the_setting_of_its_name(view: Any) -> None:
    changed = Settings(database_url="sqlite:///x.db", address="127.0.0.1:7", mcp_api_key="k", db_writers=3)
    built = view.of(changed)
    own = [f.name for f in dataclasses.fields(view) if view is c.CallerSettings or f.name not in DERIVED]
    assert own and set(own) <= SETTINGS
    assert all(getattr(built, name) == getattr(changed, name) for name in own)


def test_the_http_limits_are_the_http_settings() -> None:
    limits = c.HttpLimits.of(Settings(http_header_timeout_seconds=1.5, http_max_connections=9))
    assert (limits.header_seconds, limits.max_connections) == (1.5, 9)
    assert c.HttpLimits.of(Settings()) == c.HttpLimits()  # the listeners' defaults are the settings'


@pytest.mark.parametrize("view", [c.GrpcSettings, c.InspectorSettings, c.McpSettings])
def test_the_dev_tenant_is_given_only_under_insecure_dev(view: Any) -> None:
    assert view.of(Settings(dev_tenant="t")).dev_tenant is None
    assert view.of(Settings(dev_tenant="t", insecure_dev=True)).dev_tenant == "t"
