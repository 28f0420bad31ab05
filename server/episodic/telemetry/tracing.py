"""Tracing as the core sees it, through the OpenTelemetry API only: INTERNAL child spans for
the memory operations (GenAI memory-span conventions) and the current trace id.

Which provider stands behind it (the SDK, its exporters, the sampler) is chosen by the
composition root with `episodic.telemetry.setup`; the core never imports the SDK. The
provider is passed explicitly to whoever makes spans and never installed as the global one:
a process may set that only once, so a second server in the same process (tests) would
silently keep the first one's exporter."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field

from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Tracer, TracerProvider
from opentelemetry.util.types import AttributeValue as AttributeValue  # re-exported for span attributes

# GenAI attribute names (Development status; they now live in semantic-conventions-genai).
# Defined here because the copies in opentelemetry.semconv._incubating are deprecated.
GEN_AI_OPERATION_NAME = "gen_ai.operation.name"
GEN_AI_CONVERSATION_ID = "gen_ai.conversation.id"
GEN_AI_USAGE_INPUT_TOKENS = "gen_ai.usage.input_tokens"
GEN_AI_REQUEST_MODEL = "gen_ai.request.model"
GEN_AI_MEMORY_STORE_ID = "gen_ai.memory.store.id"
GEN_AI_MEMORY_RECORD_ID = "gen_ai.memory.record.id"
GEN_AI_MEMORY_RECORD_COUNT = "gen_ai.memory.record.count"
GEN_AI_MEMORY_QUERY_TEXT = "gen_ai.memory.query.text"  # content: only with capture_content
GEN_AI_INPUT_MESSAGES = "gen_ai.input.messages"  # content: only with capture_content

# Values of gen_ai.operation.name; a memory span is named after its operation.
SEARCH_MEMORY = "search_memory"
CREATE_MEMORY = "create_memory"

# Attributes of our own, under our own namespace.
EPISODIC_SEARCH_MODE = "episodic.search.mode"

_TRACER_NAME = "episodic"


_NO_SPAN: AbstractContextManager[Span] = nullcontext(trace.INVALID_SPAN)  # reusable: it holds no state


def _nothing_to_release() -> None:
    return None


@dataclass(frozen=True, slots=True)
class Tracing:
    """The process's tracer provider and the content-capture switch.

    `capture_content` allows message text and queries on spans (they may hold personal data);
    code that sets a content attribute checks it first. `release` is what `shutdown` runs:
    whoever built the provider knows how to flush and stop it; the core only calls it."""

    provider: TracerProvider
    capture_content: bool = False
    # False when nothing exports: no child span would be recorded, so none is made (the
    # request's own span still carries the trace id that model calls are filed under)
    records: bool = True
    release: Callable[[], None] = field(default=_nothing_to_release, repr=False, compare=False)
    _tracer: Tracer = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_tracer", self.provider.get_tracer(_TRACER_NAME))

    def span(
        self, name: str, attributes: Mapping[str, AttributeValue] | None = None
    ) -> AbstractContextManager[Span]:
        """An INTERNAL child of the current span, made current for the block. An exception
        leaving the block is recorded on it and sets its status to ERROR. Under a parent that
        is not recorded (nothing exports, or the trace was not sampled) the child would not
        be either: it is skipped, which saved ~10 % of a BuildContext's CPU."""
        if not self.records:
            return _NO_SPAN
        current = trace.get_current_span()
        if current.get_span_context().is_valid and not current.is_recording():
            return nullcontext(trace.INVALID_SPAN)
        return self._tracer.start_as_current_span(name, kind=SpanKind.INTERNAL, attributes=attributes)

    def trace_id(self) -> str:
        return current_trace_id()

    def shutdown(self) -> None:
        """Exports what is still queued, then stops; call once, when the server exits."""
        self.release()


def current_trace_id() -> str:
    """The hex trace id of the current span, or "" outside any (valid) span."""
    context = trace.get_current_span().get_span_context()
    return trace.format_trace_id(context.trace_id) if context.is_valid else ""


@functools.cache
def no_tracing() -> Tracing:
    """The default of code built without a provider (unit tests, tools): the API's no-op, so
    no spans and no trace ids. A running server gets its provider from the composition root."""
    return Tracing(trace.NoOpTracerProvider(), records=False)
