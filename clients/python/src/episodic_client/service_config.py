"""The clients' default gRPC service config, for N replicas behind one target.

- `round_robin`: calls spread over every address the target resolves to: a list
  (`ipv4:10.0.0.1:50051,10.0.0.2:50051`) or a DNS name with one record per replica
  (`dns:///episodic.ns.svc.cluster.local:50051`, a Kubernetes headless Service). The
  default, `pick_first`, would send everything to one replica.
- A retry policy on UNAVAILABLE (a replica stopping or gone, the database briefly out)
  and CANCELLED (see RETRY_POLICY) for the methods a replay cannot change the outcome
  of: reads, and writes idempotent by contract (CloseEpisode, EraseUser,
  RecordModelReply of the same reply, PushAssistantDelta with its offset,
  FinalizeAssistantMessage). WatchEpisode is not: a stream already under way is resumed
  by the caller with `after_seq`. Methods are left out when only some requests are
  idempotent (a policy names methods, never fields): OpenEpisode (only with episode_id),
  AddMessage / AddMessages and BuildContext (only with client_message_id / request_id),
  CreateMemories (only with client ids); so are CreateAgent and DeleteMemory (a replay
  fails), UpdateAgent, UpdateSessionData, UpdateMemory and CallMemoryTool. Retry those
  yourself when your request carries its idempotency key.

The JSON is the same for every language (docs/deployment.md); `SERVICE_CONFIG_JSON` is
what the Python clients use unless given another.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

RETRYABLE: Mapping[str, Sequence[str]] = {
    "episodic.v1.AgentService": ("GetAgent", "ListAgents"),
    "episodic.v1.EpisodeService": (
        "GetEpisode",
        "ListEpisodes",
        "ListMessages",
        "SearchEpisodes",
        "CloseEpisode",
        "EraseUser",
        "PushAssistantDelta",
        "FinalizeAssistantMessage",
    ),
    "episodic.v1.ContextService": ("GetModelCall", "ListModelCalls", "RecordModelReply"),
    "episodic.v1.MemoryService": (
        "GetMemory",
        "ListMemories",
        "SearchMemories",
        "GetSessionData",
        "GetMemoryTools",
    ),
    "episodic.v1.KnowledgeService": ("GetDocument", "ListDocuments", "SearchKnowledge"),
    "episodic.v1.DiagnosticsService": ("Echo", "CheckIndex"),
    "grpc.health.v1.Health": ("Check",),
}

# 4 attempts over ~0.7 s of back-off (jittered): enough to step over a replica that just
# went away, short against the clients' default 10 s deadline, which bounds every attempt.
# CANCELLED too: a stopping server cancels the calls it has received but not yet handed to
# a handler (grpc/grpc#41785), and these methods are safe to replay whatever happened.
RETRY_POLICY: Mapping[str, Any] = {
    "maxAttempts": 4,
    "initialBackoff": "0.1s",
    "maxBackoff": "1s",
    "backoffMultiplier": 2,
    "retryableStatusCodes": ["UNAVAILABLE", "CANCELLED"],
}


def service_config(
    retryable: Mapping[str, Sequence[str]] = RETRYABLE, retry_policy: Mapping[str, Any] = RETRY_POLICY
) -> dict[str, Any]:
    """The service config as a dict: round-robin, and `retry_policy` on `retryable`."""
    names = [
        {"service": service, "method": method} for service, methods in retryable.items() for method in methods
    ]
    return {
        "loadBalancingConfig": [{"round_robin": {}}],
        "methodConfig": [{"name": names, "retryPolicy": dict(retry_policy)}],
    }


SERVICE_CONFIG_JSON = json.dumps(service_config(), indent=2)


def channel_options(config_json: str | None = SERVICE_CONFIG_JSON) -> list[tuple[str, Any]]:
    """Channel options that apply `config_json` (None: gRPC's defaults, no retries, and a
    service config the name resolver may supply, e.g. from a DNS TXT record)."""
    if config_json is None:
        return []
    return [("grpc.service_config", config_json), ("grpc.enable_retries", 1)]
