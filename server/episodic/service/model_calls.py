"""The model-call record as clients read and complete it: get one, list an episode's, and
record the model's reply. BuildContext stores each call (service/context.py); this use
case owns everything after."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import timedelta

from episodic.domain.access import require_visible
from episodic.domain.context import ModelCall, ModelReply
from episodic.domain.model import Caller, Page
from episodic.domain.paging import JsonScalar, decode_token, page_of, read_id, read_time
from episodic.domain.ports.clock import Clock
from episodic.domain.ports.episodes import ContextStore
from episodic.domain.validation import Limits, Violations, check_id, resolve_page_size
from episodic.service.episodes import EpisodeService


@dataclass(slots=True, kw_only=True)
class ModelCallService:
    store: ContextStore
    episodes: EpisodeService  # whether the caller may see an episode
    limits: Limits
    clock: Clock

    async def get_model_call(self, caller: Caller, model_call_id: str) -> ModelCall:
        v = Violations()
        check_id(v, "model_call_id", model_call_id)
        v.raise_if_any()
        call = await self.store.get_call(caller.tenant_id, model_call_id)
        require_visible(caller, call.agent_id, "model call", model_call_id)
        return call

    async def list_model_calls(
        self, caller: Caller, episode_id: str, page_size: int, page_token: str
    ) -> Page[ModelCall]:
        v = Violations()
        check_id(v, "episode_id", episode_id)
        limit = resolve_page_size(v, "page_size", page_size, self.limits)
        v.raise_if_any()
        query: dict[str, JsonScalar] = {"episode_id": episode_id}
        position = decode_token(page_token, query)
        before = (read_time(position, "created_at"), read_id(position, "model_call_id")) if position else None
        await self.episodes.ensure_visible(caller, episode_id)
        found = await self.store.list_calls(caller.tenant_id, episode_id, before, limit + 1)
        return page_of(found, limit, _call_position, query)

    async def record_reply(self, caller: Caller, model_call_id: str, reply: ModelReply) -> ModelCall:
        v = Violations()
        check_id(v, "model_call_id", model_call_id)
        _check_reply(v, reply)
        v.raise_if_any()
        if caller.agents is not None:  # the write must not happen for another agent's call
            await self.get_model_call(caller, model_call_id)
        stamped = dataclasses.replace(reply, recorded_at=self.clock())
        return await self.store.record_reply(caller.tenant_id, model_call_id, stamped)


def _call_position(last: ModelCall) -> dict[str, JsonScalar]:
    return {"created_at": last.created_at.isoformat(), "model_call_id": last.model_call_id}


def _check_reply(v: Violations, reply: ModelReply) -> None:
    if reply.input_tokens < 0:
        v.add("input_tokens", "must not be negative")
    if reply.output_tokens < 0:
        v.add("output_tokens", "must not be negative")
    if reply.latency < timedelta(0):
        v.add("latency", "must not be negative")
    if reply.assistant_message_seq < 0:
        v.add("assistant_message_seq", "must not be negative")
