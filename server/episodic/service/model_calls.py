"""The model-call record: BuildContext names and stores each call through
`ModelCallRecorder` (service/context.py); clients read and complete it here: get one, list an
episode's, and record the model's reply."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from episodic.domain.access import require_visible
from episodic.domain.context import ModelCall, ModelReply, Summary
from episodic.domain.model import Caller, Page
from episodic.domain.paging import JsonScalar, decode_token, page_of, read_id, read_time
from episodic.domain.ports.clock import Clock, IdFactory
from episodic.domain.ports.episodes import ContextStore
from episodic.domain.validation import Limits, Violations, check_id, resolve_page_size
from episodic.service.episodes import EpisodeService
from episodic.state.records_in_flight import RecordsInFlight


@dataclass(slots=True, kw_only=True)
class ModelCallRecorder:
    """A turn's last step: its model call named (an id, a time) and stored with any new
    summary in one transaction; a new call's section tokens told to the metrics."""

    store: ContextStore
    clock: Clock
    new_id: IdFactory
    # told the tokens of each section of every new model call (metrics)
    rendered: Callable[[Iterable[tuple[str, int]]], None]
    in_flight: RecordsInFlight  # records being stored, which reads of them wait for

    def name(self) -> tuple[str, datetime]:
        """A new call's id and time."""
        return f"mc_{self.new_id()}", self.clock()

    def storing(self, call: ModelCall, commit: asyncio.Future[Any]) -> None:
        """`call`'s record is being stored by `commit`: its report may go out before."""
        self.in_flight.add(call.tenant_id, call.model_call_id, call.episode_id, commit)

    async def save(self, call: ModelCall, summary: Summary | None) -> tuple[ModelCall, bool]:
        """The stored call and whether it is new (False: another call of its request_id won)."""
        stored, fresh = await self.store.save_call(call, summary)
        if fresh:  # the sections rendered: an absent one observed as 0 skewed every average
            self.rendered(
                (section, tokens) for section, tokens in stored.report.section_tokens.items() if tokens
            )
        return stored, fresh


@dataclass(slots=True, kw_only=True)
class ModelCallService:
    store: ContextStore
    episodes: EpisodeService  # whether the caller may see an episode
    limits: Limits
    clock: Clock
    in_flight: RecordsInFlight  # a call whose report went out before its record: waited for

    async def get_model_call(self, caller: Caller, model_call_id: str) -> ModelCall:
        v = Violations()
        check_id(v, "model_call_id", model_call_id)
        v.raise_if_any()
        await self.in_flight.settled(caller.tenant_id, model_call_id)
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
        await self.in_flight.settled_in(caller.tenant_id, episode_id)
        found = await self.store.list_calls(caller.tenant_id, episode_id, before, limit + 1)
        return page_of(found, limit, _call_position, query)

    async def record_reply(self, caller: Caller, model_call_id: str, reply: ModelReply) -> ModelCall:
        v = Violations()
        check_id(v, "model_call_id", model_call_id)
        _check_reply(v, reply)
        v.raise_if_any()
        if caller.agents is not None:  # the write must not happen for another agent's call
            await self.get_model_call(caller, model_call_id)
        else:
            await self.in_flight.settled(caller.tenant_id, model_call_id)
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
