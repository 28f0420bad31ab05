"""The domain's values built from the settings: the limits every request is held to, the
tenants' shares, the watchers' and drafts' limits, the per-tenant retention caps and PII
policies. The composition root hands each service the value it needs."""

from __future__ import annotations

from episodic.config.options import days, named, per_tenant, server_pii_policy
from episodic.config.settings import Settings
from episodic.domain.drafts import DraftLimits
from episodic.domain.model import PiiPolicy
from episodic.domain.shares import ShareLimits
from episodic.domain.validation import Limits
from episodic.domain.watch import WatchLimits


def limits(s: Settings) -> Limits:
    return Limits(
        max_content_bytes=s.max_content_bytes,
        max_batch_messages=s.max_batch_messages,
        max_json_bytes=s.max_json_bytes,
        max_context_tokens=s.max_context_tokens,
    )


def share_limits(s: Settings) -> ShareLimits:
    return ShareLimits(
        rate_per_second=s.tenant_rate_per_second,
        rate_burst=s.tenant_rate_burst,
        rpcs=s.tenant_max_rpcs,
        active=s.tenant_max_active,
        streams=s.tenant_max_streams,
        unsent_bytes=s.tenant_max_unsent_bytes,
        watchers=s.tenant_max_watchers,
        memory_writes_per_second=s.tenant_memory_writes_per_second,
        memory_writes_burst=s.tenant_memory_writes_burst,
        knowledge_chunks_per_second=s.tenant_knowledge_chunks_per_second,
        knowledge_chunks_burst=s.tenant_knowledge_chunks_burst,
        import_bytes_per_second=s.tenant_import_bytes_per_second,
        import_bytes_burst=s.tenant_import_bytes_burst,
        import_held_bytes=s.tenant_import_held_bytes,
        server_rpcs=s.max_concurrent_rpcs,
    )


def watch_limits(s: Settings) -> WatchLimits:
    return WatchLimits(
        per_episode=s.max_watchers_per_episode,
        per_process=s.max_watchers,
        per_tenant=s.tenant_max_watchers,
        buffer_events=s.watch_buffer_events,
        buffer_bytes=s.watch_buffer_bytes,
        replay=limits(s).max_page_size,
    )


def draft_limits(s: Settings) -> DraftLimits:
    return DraftLimits(max_bytes=s.max_content_bytes, per_episode=s.max_drafts_per_episode)


def retention_caps(s: Settings) -> dict[str, int]:
    """Tenant -> the most days its closed episodes may be kept."""
    return named("retention_tenant_days", per_tenant, s.retention_tenant_days, days)


def pii_policies(s: Settings) -> tuple[PiiPolicy, dict[str, PiiPolicy]]:
    """The server's default policy and the per-tenant ones."""
    tenants = named("pii_tenant_policies", per_tenant, s.pii_tenant_policies, server_pii_policy)
    return s.pii_policy, tenants
