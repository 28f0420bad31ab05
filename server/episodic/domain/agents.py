"""Rules of agent definitions: defaults, ranges, token encoding, and masked updates."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from episodic.domain.model import Agent, MemoryConfig, PiiPolicy, RecallMode
from episodic.domain.ports.models import TokenCounter
from episodic.domain.validation import Limits, Violations, check_id, check_text, text_problem
from episodic.errors import CONFIGURATION

MAX_CONTEXT_WINDOW = 10_000_000
MAX_TOP_K = 100
MAX_IDLE_TIMEOUT = timedelta(days=30)
MAX_RETENTION_DAYS = 36_500
MEMORY_FIELDS = tuple(f.name for f in dataclasses.fields(MemoryConfig))
AGENT_FIELDS = ("display_name", "system_prompt", "model", "token_encoding", "memory_config")


@dataclass(frozen=True, slots=True)
class MemoryDraft:
    """Memory settings as sent by a client; None means "not given"."""

    max_working_memory_tokens: int | None = None
    context_window_tokens: int | None = None
    context_ceiling_percent: int | None = None
    recall_mode: RecallMode | None = None
    recall_top_k: int | None = None
    recall_min_score: float | None = None
    tool_results_kept_verbatim: int | None = None
    idle_timeout: timedelta | None = None
    retention_days: int | None = None
    pii_policy: PiiPolicy | None = None
    known_facts: bool | None = None
    memory_top_k: int | None = None
    memory_min_score: float | None = None
    session_data_keys: tuple[str, ...] | None = None
    memory_extraction_prompt: str | None = None
    extract_memories: bool | None = None
    knowledge: bool | None = None
    knowledge_top_k: int | None = None
    knowledge_min_score: float | None = None
    knowledge_budget_percent: int | None = None
    known_facts_budget_percent: int | None = None
    recall_budget_percent: int | None = None
    earlier_budget_percent: int | None = None


@dataclass(frozen=True, slots=True)
class AgentDraft:
    """An agent as sent by a client, before defaults and checks."""

    agent_id: str
    display_name: str = ""
    system_prompt: str = ""
    model: str = ""
    token_encoding: str = ""
    memory: MemoryDraft = field(default_factory=MemoryDraft)


def build_agent(
    tenant_id: str, draft: AgentDraft, tokens: TokenCounter, limits: Limits, now: datetime
) -> Agent:
    v = Violations()
    check_id(v, "agent.agent_id", draft.agent_id)
    _check_texts(v, draft, limits)
    memory = fill_memory(MemoryConfig(), draft.memory)
    check_memory(v, "agent.memory_config", memory)
    encoding = resolve_encoding(v, draft, tokens)
    v.raise_if_any(_subject(v))
    return Agent(
        tenant_id=tenant_id,
        agent_id=draft.agent_id,
        display_name=draft.display_name,
        system_prompt=draft.system_prompt,
        model=draft.model,
        token_encoding=encoding,
        encoding_pinned=bool(draft.token_encoding),
        memory=memory,
        created_at=now,
        updated_at=now,
    )


def _subject(v: Violations) -> str:
    """An agent wrong only in its memory configuration is a configuration problem."""
    memory_only = all(item.field.startswith("agent.memory_config.") for item in v.items)
    return CONFIGURATION if memory_only else "request"


def update_agent(
    agent: Agent,
    draft: AgentDraft,
    mask: Sequence[str],
    tokens: TokenCounter,
    limits: Limits,
    now: datetime,
) -> Agent:
    """Applies the masked fields of draft; an empty mask changes nothing."""
    paths = list(mask)
    _check_mask(paths)
    merged = _merge(agent, draft, paths)
    return dataclasses.replace(
        build_agent(agent.tenant_id, merged, tokens, limits, now), created_at=agent.created_at
    )


def _check_mask(paths: Sequence[str]) -> None:
    v = Violations()
    allowed = set(AGENT_FIELDS) | {f"memory_config.{name}" for name in MEMORY_FIELDS}
    for path in paths:
        if path not in allowed:
            v.add("update_mask", f"path {path!r} is not updatable; use one of {sorted(allowed)}")
    v.raise_if_any()


def _merge(agent: Agent, draft: AgentDraft, paths: Sequence[str]) -> AgentDraft:
    current = to_draft(agent)
    top = {p: getattr(draft, p) for p in paths if p in AGENT_FIELDS and p != "memory_config"}
    memory = draft.memory if "memory_config" in paths else _merge_memory(current.memory, draft, paths)
    if "model" in paths and "token_encoding" not in paths and not agent.encoding_pinned:
        top["token_encoding"] = ""
    return dataclasses.replace(current, memory=memory, **top)


def _merge_memory(current: MemoryDraft, draft: AgentDraft, paths: Sequence[str]) -> MemoryDraft:
    changes = {
        p.split(".", 1)[1]: getattr(draft.memory, p.split(".", 1)[1])
        for p in paths
        if p.startswith("memory_config.")
    }
    return dataclasses.replace(current, **changes)


def to_draft(agent: Agent) -> AgentDraft:
    memory = MemoryDraft(**{name: getattr(agent.memory, name) for name in MEMORY_FIELDS})
    return AgentDraft(
        agent_id=agent.agent_id,
        display_name=agent.display_name,
        system_prompt=agent.system_prompt,
        model=agent.model,
        token_encoding=agent.token_encoding if agent.encoding_pinned else "",
        memory=memory,
    )


def fill_memory(base: MemoryConfig, draft: MemoryDraft) -> MemoryConfig:
    given = {name: getattr(draft, name) for name in MEMORY_FIELDS}
    return dataclasses.replace(base, **{k: val for k, val in given.items() if val is not None})


def check_memory(v: Violations, prefix: str, m: MemoryConfig) -> None:
    _in_range(v, f"{prefix}.context_window_tokens", m.context_window_tokens, 1, MAX_CONTEXT_WINDOW)
    _in_range(v, f"{prefix}.context_ceiling_percent", m.context_ceiling_percent, 1, 100)
    _in_range(v, f"{prefix}.max_working_memory_tokens", m.max_working_memory_tokens, 1, m.ceiling_tokens)
    _in_range(v, f"{prefix}.recall_top_k", m.recall_top_k, 1, MAX_TOP_K)
    _in_range(v, f"{prefix}.tool_results_kept_verbatim", m.tool_results_kept_verbatim, 0, 1000)
    if not 0.0 <= m.recall_min_score <= 1.0:
        v.add(f"{prefix}.recall_min_score", "must be between 0 and 1")
    _in_range(v, f"{prefix}.retention_days", m.retention_days, 0, MAX_RETENTION_DAYS)
    if not timedelta(seconds=1) <= m.idle_timeout <= MAX_IDLE_TIMEOUT:
        v.add(f"{prefix}.idle_timeout", "must be between 1 second and 30 days")
    _check_memory_recall(v, prefix, m)
    _check_knowledge(v, prefix, m)


def _check_knowledge(v: Violations, prefix: str, m: MemoryConfig) -> None:
    _in_range(v, f"{prefix}.knowledge_top_k", m.knowledge_top_k, 0, MAX_TOP_K)
    if not 0.0 <= m.knowledge_min_score <= 1.0:
        v.add(f"{prefix}.knowledge_min_score", "must be between 0 and 1")
    for name in ("knowledge_budget_percent", "known_facts_budget_percent", "recall_budget_percent",
                 "earlier_budget_percent"):  # fmt: skip
        _in_range(v, f"{prefix}.{name}", getattr(m, name), 0, 100)


MAX_SESSION_DATA_KEYS = 32
MAX_EXTRACTION_PROMPT_CHARS = 8000


def _check_memory_recall(v: Violations, prefix: str, m: MemoryConfig) -> None:
    _in_range(v, f"{prefix}.memory_top_k", m.memory_top_k, 1, MAX_TOP_K)
    if not 0.0 <= m.memory_min_score <= 1.0:
        v.add(f"{prefix}.memory_min_score", "must be between 0 and 1")
    keys = m.session_data_keys
    if len(keys) > MAX_SESSION_DATA_KEYS:
        v.add(f"{prefix}.session_data_keys", f"at most {MAX_SESSION_DATA_KEYS} keys")
    for i, key in enumerate(keys[:MAX_SESSION_DATA_KEYS]):
        if not key or len(key) > 128 or text_problem(key):
            v.add(f"{prefix}.session_data_keys.keys[{i}]", "must be 1-128 characters of valid text")
    prompt = m.memory_extraction_prompt
    if len(prompt) > MAX_EXTRACTION_PROMPT_CHARS:
        v.add(
            f"{prefix}.memory_extraction_prompt", f"must be at most {MAX_EXTRACTION_PROMPT_CHARS} characters"
        )
    elif problem := text_problem(prompt):
        v.add(f"{prefix}.memory_extraction_prompt", problem)


def _in_range(v: Violations, field: str, value: int, low: int, high: int) -> None:
    if not low <= value <= high:
        v.add(field, f"must be between {low} and {high}, got {value}")


def _check_texts(v: Violations, draft: AgentDraft, limits: Limits) -> None:
    check_text(v, "agent.display_name", draft.display_name, 1024)
    check_text(v, "agent.system_prompt", draft.system_prompt, limits.max_content_bytes)
    check_text(v, "agent.model", draft.model, 256)


def resolve_encoding(v: Violations, draft: AgentDraft, tokens: TokenCounter) -> str:
    """An explicit encoding must be one we ship; otherwise it follows the model."""
    if not draft.token_encoding:
        return tokens.encoding_for_model(draft.model)
    supported = tokens.supported_encodings()
    if draft.token_encoding not in supported:
        v.add("agent.token_encoding", f"unknown encoding; supported: {', '.join(sorted(supported))}")
    return draft.token_encoding
