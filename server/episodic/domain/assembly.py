"""Context assembly: what one model call sees, in order, under the token budget. Pure.

Order: system prompt -> "[Knowledge]" -> "[Known Facts]" -> "[Past Conversations]" ->
summary of compacted history -> "[Earlier in this conversation]" (passages the summary covers,
recalled for the turn) -> history tail -> current user message. The system prompt and
the user message are mandatory; if they alone pass the hard ceiling the call fails rather
than truncating anything. The rest is fitted into the budget in that order of priority, each
optional section within its share of the budget (`Shares`, the agent's
knowledge/known_facts/recall/earlier_budget_percent: 25/25/50/50 by default) and of what is
left: the knowledge, the known facts, the recalled episodes, the latest summary, the earlier
passages, then as many of the newest history turns as fit.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from episodic.domain.context import (
    RecalledEpisode,
    RecalledMemory,
    RecalledPassage,
    RenderedMessage,
    Section,
    Span,
    Summary,
)
from episodic.domain.earlier_block import EarlierFound, earlier_block, spelled_day
from episodic.domain.knowledge import KnowledgeItem, RenderedKnowledge
from episodic.domain.knowledge_block import Trim, knowledge_block
from episodic.domain.known_facts import KnownFact, facts_block
from episodic.domain.model import JsonValue, Message, Role
from episodic.domain.recall import Snippet
from episodic.domain.reducers import (
    MESSAGE_OVERHEAD,
    REPLY_PRIMING,
    CountTokens,
    Turn,
    fit_in_order,
    group_turns,
    newest_that_fit,
    rendered,
    stub_old_tool_results,
    tokens_of,
)
from episodic.errors import FailedPrecondition, InvalidArgument

EXCERPTS_HEADER = "Relevant excerpts:"  # verbatim messages of that conversation matching this turn
KEEP_AFTER_COMPACTION = 0.5  # compaction leaves the tail at half its allowance: not every turn
RECALL_HEADER = (
    "[Past Conversations]\nThe following are relevant conversations this user has had with you previously:\n"
)
RECALL_FOOTER = "Use this context to personalise your response."
SUMMARY_HEADER = "[Summary of earlier conversation]\n"
KEY_FACTS_LABEL = "Key facts: "
_SECTIONS = tuple(Section)  # iterating the enum itself costs a Python call per member


@dataclass(frozen=True, slots=True)
class Budget:
    budget: int
    ceiling: int


@dataclass(frozen=True, slots=True)
class Shares:
    """The most of the budget (percent) each optional section may take."""

    knowledge: int = 25
    known_facts: int = 25
    recall: int = 50
    earlier: int = 50

    def of(self, budget: int, percent: int) -> int:
        return budget * percent // 100


@dataclass(frozen=True, slots=True)
class AssemblyInput:
    system_prompt: str
    user_message: str
    snippets: Sequence[Snippet]
    summary: Summary | None
    tail: Sequence[Message]  # log messages after the summary's span, oldest first
    keep_tool_results: int
    budget: Budget
    can_compact: bool
    system_prompt_overridden: bool = False
    held_after: int = 0  # the tail holds the messages after this seq
    facts: Sequence[KnownFact] = ()  # long-term memories found for this turn, best first
    session: Sequence[tuple[str, JsonValue]] = ()  # session data the agent asked to render
    knowledge: Sequence[KnowledgeItem] = ()  # the caller's items and the stored chunks found
    shares: Shares = Shares()
    earlier: EarlierFound | None = None  # this episode's compacted messages matching the turn


@dataclass(frozen=True, slots=True)
class Assembly:
    messages: tuple[RenderedMessage, ...]
    section_tokens: dict[Section, int]
    over_budget: bool
    pruned: int
    stubbed: int
    summary_span: Span
    history_span: Span
    recalled: tuple[RecalledEpisode, ...]
    compact_through: int  # > 0: the tail through this seq should be summarized
    memories: tuple[RecalledMemory, ...] = ()
    session_keys: tuple[str, ...] = ()
    knowledge: tuple[RenderedKnowledge, ...] = ()
    earlier: tuple[RecalledPassage, ...] = ()


def mandatory_sections(
    inp: AssemblyInput, count: CountTokens
) -> tuple[RenderedMessage, RenderedMessage | None, int]:
    """System prompt and user message, and their tokens with the reply priming; raises if
    they alone pass the ceiling. Checked before anything is written for the turn."""
    system = rendered(Role.SYSTEM, inp.system_prompt, Section.SYSTEM, count)
    user = rendered(Role.USER, inp.user_message, Section.USER_MESSAGE, count) if inp.user_message else None
    mandatory = system.tokens + (user.tokens if user else 0) + REPLY_PRIMING
    _check_ceiling(inp, system, mandatory)
    return system, user, mandatory


def assemble(inp: AssemblyInput, count: CountTokens, trim: Trim | None = None) -> Assembly:
    """`trim` cuts a knowledge item to a token boundary; None: one that does not fit is dropped."""
    system, user, mandatory = mandatory_sections(inp, count)
    budget, shares = inp.budget.budget, inp.shares
    room = budget - mandatory
    knowledge, known = knowledge_block(
        inp.knowledge, min(room, shares.of(budget, shares.knowledge)), count, trim
    )
    room -= knowledge.tokens if knowledge else 0
    facts, memories, keys = facts_block(
        inp.facts, inp.session, min(room, shares.of(budget, shares.known_facts)), count
    )
    room -= facts.tokens if facts else 0
    recall, recalled = recall_block(inp.snippets, min(room, shares.of(budget, shares.recall)), count)
    room -= recall.tokens if recall else 0
    summary = summary_message(inp.summary) if inp.summary else None
    if summary is not None and summary.tokens > room:
        summary = None
    room -= summary.tokens if summary else 0
    earlier, passages = earlier_block(inp.earlier, min(room, shares.of(budget, shares.earlier)), count)
    room -= earlier.tokens if earlier else 0
    fixed = _Fixed(
        system, user, recall, summary, recalled, room < 0, facts, memories, keys, knowledge, known,
        earlier, passages,
    )  # fmt: skip
    return _fit_history(inp, count, max(room, 0), fixed)


@dataclass(frozen=True, slots=True)
class _Fixed:
    """The sections decided before the history tail."""

    system: RenderedMessage
    user: RenderedMessage | None
    recall: RenderedMessage | None
    summary: RenderedMessage | None
    recalled: tuple[RecalledEpisode, ...]
    over_budget: bool
    facts: RenderedMessage | None = None
    memories: tuple[RecalledMemory, ...] = ()
    session_keys: tuple[str, ...] = ()
    knowledge: RenderedMessage | None = None
    known: tuple[RenderedKnowledge, ...] = ()
    earlier: RenderedMessage | None = None
    passages: tuple[RecalledPassage, ...] = ()


def _fit_history(inp: AssemblyInput, count: CountTokens, allowance: int, fixed: _Fixed) -> Assembly:
    stubs = stub_old_tool_results(inp.tail, inp.keep_tool_results, count)
    turns = group_turns(stubs.messages)
    kept_turns = turns[len(turns) - newest_that_fit(turns, allowance) :]
    history = [m for turn in kept_turns for m in turn.messages]
    ordered = [
        fixed.system, fixed.knowledge, fixed.facts, fixed.recall, fixed.summary, fixed.earlier, *history,
        fixed.user,
    ]  # fmt: skip
    messages = tuple([m for m in ordered if m is not None])
    return Assembly(
        messages=messages,
        section_tokens=_section_tokens(messages),
        over_budget=fixed.over_budget,
        pruned=len(stubs.messages) - len(history) + _unheld(inp),
        stubbed=sum(1 for m in history if m.stubbed),
        summary_span=_summary_span(inp.summary if fixed.summary else None),
        history_span=Span(history[0].seq, history[-1].seq) if history else Span(),
        recalled=fixed.recalled,
        memories=fixed.memories,
        session_keys=fixed.session_keys,
        knowledge=fixed.known,
        earlier=fixed.passages,
        # with no room for any history this turn, a summary could not be shown either
        compact_through=_compact_through(turns, allowance)
        if inp.can_compact and not fixed.over_budget
        else 0,
    )


def _check_ceiling(inp: AssemblyInput, system: RenderedMessage, mandatory: int) -> None:
    ceiling = inp.budget.ceiling
    if mandatory <= ceiling:
        return
    if system.tokens + REPLY_PRIMING > ceiling:
        detail = f"the system prompt alone is {system.tokens} tokens, over the ceiling of {ceiling}"
        if inp.system_prompt_overridden:
            raise InvalidArgument.of("system_prompt", detail)
        raise FailedPrecondition(f"{detail}: shorten the agent's system prompt", reason="CONTEXT_TOO_LARGE")
    raise InvalidArgument.of(
        "user_message",
        f"system prompt and user message are {mandatory} tokens, over the ceiling of {ceiling}",
    )


def _section_tokens(messages: Sequence[RenderedMessage]) -> dict[Section, int]:
    totals = dict.fromkeys(_SECTIONS, 0)
    for m in messages:
        totals[m.section] += m.tokens
    return totals


def _unheld(inp: AssemblyInput) -> int:
    """Messages before the tail that the summary does not cover (a big import left them in
    SQL): left out like pruned ones. Seqs are dense; a summary's span is contiguous."""
    s = inp.summary
    covered = max(min(s.to_seq, inp.held_after) - s.from_seq + 1, 0) if s else 0
    return max(inp.held_after - covered, 0)


def _summary_span(summary: Summary | None) -> Span:
    return Span(summary.from_seq, summary.to_seq) if summary else Span()


def _compact_through(turns: Sequence[Turn], allowance: int) -> int:
    """When the tail does not fit, the seq through which the oldest turns should be
    summarized so the rest fits in KEEP_AFTER_COMPACTION of the allowance; 0 otherwise."""
    if tokens_of(turns) <= allowance:
        return 0
    keep = max(newest_that_fit(turns, int(allowance * KEEP_AFTER_COMPACTION)), 1)
    older = turns[: len(turns) - keep]
    return older[-1].last_seq if older else 0


def summary_message(summary: Summary) -> RenderedMessage:
    """A summary's content is stored exactly as rendered, with its count."""
    return RenderedMessage(
        Role.CONTEXT, summary.content, Section.SUMMARY, summary.token_count + MESSAGE_OVERHEAD
    )


def summary_content(summary: str, key_facts: Sequence[str]) -> str:
    lines = [SUMMARY_HEADER + summary.strip()]
    if key_facts:
        lines.append(KEY_FACTS_LABEL + " ".join([_sentence(f) for f in key_facts]))
    return "\n".join(lines)


def recall_block(
    snippets: Sequence[Snippet], allowance: int, count: CountTokens
) -> tuple[RenderedMessage | None, tuple[RecalledEpisode, ...]]:
    """The "[Past Conversations]" message: as many episodes (date, summary, key facts), best
    first, as fit; then, with the tokens left, their excerpts, best episode first. Breadth
    first: an episode the model does not see at all costs more than a detail of one it does."""
    room = allowance - count(RECALL_HEADER + "\n" + RECALL_FOOTER) - MESSAGE_OVERHEAD
    bare = [dataclasses.replace(s, excerpts=()) for s in snippets]
    chosen = fit_in_order([_entry(s) for s in bare], room, count)
    detailed = [_entry(s) for s in _with_excerpts(snippets, bare, chosen, room, count)]
    message = rendered(Role.CONTEXT, _block(detailed, chosen), Section.PAST_CONVERSATIONS, count)
    if chosen and message.tokens <= allowance:
        return message, _recalled(snippets, chosen)
    entries = [_entry(s) for s in bare]  # counts are not exactly additive: without details,
    while chosen:  # then with fewer episodes, until the whole text fits
        message = rendered(Role.CONTEXT, _block(entries, chosen), Section.PAST_CONVERSATIONS, count)
        if message.tokens <= allowance:
            return message, _recalled(snippets, chosen)
        chosen = chosen[:-1]
    return None, _recalled(snippets, [])


def _with_excerpts(
    snippets: Sequence[Snippet], bare: Sequence[Snippet], chosen: Sequence[int], room: int, count: CountTokens
) -> list[Snippet]:
    """Each chosen episode takes as many of its excerpts, in order, as the room left allows."""
    left = room - sum(count(_entry(bare[i])) for i in chosen)
    shown = list(bare)
    for i in chosen:
        kept: list[str] = []
        for excerpt in snippets[i].excerpts:
            cost = count(("" if kept else EXCERPTS_HEADER + "\n") + f"- {excerpt}\n")
            if cost > left:
                break
            kept.append(excerpt)
            left -= cost
        shown[i] = dataclasses.replace(bare[i], excerpts=tuple(kept))
    return shown


def _block(entries: Sequence[str], chosen: Sequence[int]) -> str:
    return RECALL_HEADER + "\n" + "".join(entries[i] for i in chosen) + RECALL_FOOTER


def _entry(s: Snippet) -> str:
    lines = [f"Date: {spelled_day((s.ended_at or s.started_at).date())}", f"Summary: {s.summary.strip()}"]
    if s.key_facts:
        lines.append(KEY_FACTS_LABEL + " ".join([_sentence(f) for f in s.key_facts]))
    if s.excerpts:
        lines.append(EXCERPTS_HEADER)
        lines.extend(f"- {excerpt}" for excerpt in s.excerpts)
    return "\n".join(lines) + "\n---\n"


def _sentence(fact: str) -> str:
    fact = fact.strip()
    return fact if fact.endswith((".", "!", "?")) else fact + "."


def _recalled(snippets: Sequence[Snippet], chosen: Sequence[int]) -> tuple[RecalledEpisode, ...]:
    picked = set(chosen)
    return tuple(
        RecalledEpisode(s.episode_id, s.score, s.ended_at, i in picked, s.signals)
        for i, s in enumerate(snippets)
    )
