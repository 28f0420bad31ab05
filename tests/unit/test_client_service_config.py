"""The clients' default service config: round-robin over every replica, and retries on
UNAVAILABLE only for methods that exist and that a replay cannot change."""

from __future__ import annotations

import json

from grpc_health.v1 import health_pb2

from episodic_client.service_config import RETRYABLE, SERVICE_CONFIG_JSON, channel_options, service_config
from episodic_client.v1 import (
    agent_service_pb2,
    context_service_pb2,
    diagnostics_service_pb2,
    episode_service_pb2,
    knowledge_service_pb2,
    memory_service_pb2,
)

MODULES = (
    agent_service_pb2,
    context_service_pb2,
    diagnostics_service_pb2,
    episode_service_pb2,
    knowledge_service_pb2,
    memory_service_pb2,
    health_pb2,
)
# A replay of these can store twice or answer differently (see the module's docstring).
NEVER_RETRIED = {
    "OpenEpisode",
    "AddMessage",
    "AddMessages",
    "BuildContext",
    "CreateAgent",
    "UpdateAgent",
    "CreateMemories",
    "UpdateMemory",
    "DeleteMemory",
    "UpdateSessionData",
    "CallMemoryTool",
    "CreateDocuments",  # a replay of one that landed answers created: false
    "UpdateDocument",
    "DeleteDocument",
}


def methods() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for module in MODULES:
        for service in module.DESCRIPTOR.services_by_name.values():
            found[service.full_name] = {m.name for m in service.methods}
    return found


def test_calls_are_balanced_round_robin() -> None:
    assert service_config()["loadBalancingConfig"] == [{"round_robin": {}}]


def test_every_retried_method_exists() -> None:
    known = methods()
    for service, names in RETRYABLE.items():
        assert set(names) <= known[service], (service, set(names) - known[service])


def test_only_a_replica_going_away_is_retried_and_never_a_non_idempotent_method() -> None:
    (config,) = service_config()["methodConfig"]
    assert not {name["method"] for name in config["name"]} & NEVER_RETRIED
    policy = config["retryPolicy"]
    assert policy["retryableStatusCodes"] == ["UNAVAILABLE", "CANCELLED"]
    assert 2 <= policy["maxAttempts"] <= 5  # gRPC caps attempts at 5


def test_the_json_is_what_the_channel_gets_and_none_means_grpc_defaults() -> None:
    assert json.loads(SERVICE_CONFIG_JSON) == service_config()
    assert dict(channel_options()) == {"grpc.service_config": SERVICE_CONFIG_JSON, "grpc.enable_retries": 1}
    assert channel_options(None) == []
