"""The PII policy in force for an agent's conversations, and redaction of what they store.

An agent's own policy wins; an agent that inherits follows its tenant's, and a tenant
without one the server default (configuration). Policies are looked up per append, so a
remembered answer is used for at most POLICY_TTL_SECONDS (an UpdateAgent on this server
takes effect at once: the change owner tells the guard)."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from episodic.domain.changes import AgentChanged, Change, stale_keys
from episodic.domain.model import JsonValue, NewMessage, PiiPolicy, ToolCall, ToolResult
from episodic.domain.pii import redact, redact_json
from episodic.domain.ports.episodes import AgentStore

POLICY_TTL_SECONDS = 5.0


@dataclass(kw_only=True)
class PiiGuard:
    agents: AgentStore
    default: PiiPolicy = PiiPolicy.OFF
    tenants: Mapping[str, PiiPolicy] = field(default_factory=dict)
    clock: Callable[[], float] = time.monotonic
    _remembered: dict[tuple[str, str], tuple[float, PiiPolicy]] = field(default_factory=dict)

    def redacts(self, tenant_id: str, agent_policy: PiiPolicy) -> bool:
        if agent_policy is not PiiPolicy.INHERIT:
            return agent_policy is PiiPolicy.REDACT
        return self.tenants.get(tenant_id, self.default) is PiiPolicy.REDACT

    async def redacts_for(self, tenant_id: str, agent_id: str) -> bool:
        key = (tenant_id, agent_id)
        found = self._remembered.get(key)
        if found is None or self.clock() - found[0] > POLICY_TTL_SECONDS:
            agent = await self.agents.get_agent(tenant_id, agent_id)
            found = (self.clock(), agent.memory.pii_policy)
            self._remembered[key] = found
        return self.redacts(tenant_id, found[1])

    def changed(self, change: Change) -> None:
        """An agent update takes effect at its next append, not POLICY_TTL_SECONDS later."""
        if isinstance(change, AgentChanged):
            self._remembered.pop((change.tenant_id, change.agent_id), None)
        for key in stale_keys(change, list(self._remembered)):  # a tenant's, after an erasure elsewhere
            self._remembered.pop(key, None)


def redact_text(text: str) -> str:
    return redact(text).text


def redact_message(m: NewMessage) -> NewMessage:
    """Every free text a message carries: content, metadata, tool inputs, results, errors."""
    return dataclasses.replace(
        m,
        content=redact_text(m.content),
        metadata=redact_object(m.metadata),
        tool_calls=tuple(_redact_call(c) for c in m.tool_calls),
        tool_result=_redact_result(m.tool_result) if m.tool_result else None,
    )


def redact_object(value: Mapping[str, JsonValue]) -> dict[str, JsonValue]:
    redacted = redact_json(dict(value))
    assert isinstance(redacted, dict)
    return redacted


def _redact_call(c: ToolCall) -> ToolCall:
    return dataclasses.replace(c, input=redact_object(c.input))


def _redact_result(r: ToolResult) -> ToolResult:
    return dataclasses.replace(r, output=redact_json(r.output), error=redact_text(r.error))
