"""Tracing with the OpenTelemetry SDK: a SERVER span per RPC (the gRPC instrumentation) and
INTERNAL child spans for the memory operations (GenAI memory-span conventions).

The provider is built once, from the standard OTEL_* variables, by `tracing_from_env`, and
passed explicitly to whoever makes spans. It is never installed as the global provider: a
process may set that only once, so a second server in the same process (tests) would
silently keep the first one's exporter."""

from __future__ import annotations

import functools
import logging
import urllib.parse
from collections.abc import Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any

import grpc
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.instrumentation.grpc import aio_server_interceptor, filters
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider as SdkTracerProvider
from opentelemetry.sdk.trace import sampling
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter
from opentelemetry.trace import Span, SpanKind, Tracer, TracerProvider
from opentelemetry.util.types import AttributeValue as AttributeValue  # re-exported for span attributes

# GenAI attribute names (Development status; they now live in semantic-conventions-genai).
# Defined here because the copies in opentelemetry.semconv._incubating are deprecated.
GEN_AI_OPERATION_NAME = "gen_ai.operation.name"
GEN_AI_CONVERSATION_ID = "gen_ai.conversation.id"
GEN_AI_USAGE_INPUT_TOKENS = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
GEN_AI_REQUEST_MODEL = "gen_ai.request.model"
GEN_AI_MEMORY_STORE_ID = "gen_ai.memory.store.id"
GEN_AI_MEMORY_RECORD_ID = "gen_ai.memory.record.id"
GEN_AI_MEMORY_RECORD_COUNT = "gen_ai.memory.record.count"
GEN_AI_MEMORY_QUERY_TEXT = "gen_ai.memory.query.text"  # content: only with capture_content
GEN_AI_INPUT_MESSAGES = "gen_ai.input.messages"  # content: only with capture_content

# Values of gen_ai.operation.name; a memory span is named after its operation.
SEARCH_MEMORY = "search_memory"
CREATE_MEMORY = "create_memory"
UPDATE_MEMORY = "update_memory"
DELETE_MEMORY = "delete_memory"

# Attributes of our own, under our own namespace.
EPISODIC_SEARCH_MODE = "episodic.search.mode"

DEFAULT_SERVICE_NAME = "episodic"
CAPTURE_CONTENT_VARIABLE = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
EXPORTERS = ("otlp", "console", "none")
_TRACER_NAME = "episodic"


@dataclass(frozen=True, slots=True)
class Tracing:
    """The process's tracer provider and the content-capture switch.

    `capture_content` allows message text and queries on spans (they may hold personal data);
    code that sets a content attribute checks it first."""

    provider: TracerProvider
    capture_content: bool = False
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
        current = trace.get_current_span()
        if current.get_span_context().is_valid and not current.is_recording():
            return nullcontext(trace.INVALID_SPAN)
        return self._tracer.start_as_current_span(name, kind=SpanKind.INTERNAL, attributes=attributes)

    def trace_id(self) -> str:
        return current_trace_id()

    def shutdown(self) -> None:
        """Exports what is still queued, then stops; call once, when the server exits."""
        if isinstance(self.provider, SdkTracerProvider):
            self.provider.shutdown()


def current_trace_id() -> str:
    """The hex trace id of the current span, or "" outside any (valid) span."""
    context = trace.get_current_span().get_span_context()
    return trace.format_trace_id(context.trace_id) if context.is_valid else ""


def tracing_from_env(environ: Mapping[str, str]) -> Tracing:
    """Reads the OTEL_* variables that shape tracing (see docs/observability.md).

    Spans are always made with the SDK, so trace ids exist for logs and model calls even
    when nothing is exported; they are recorded and exported only when an exporter is
    configured. The OTLP exporter's own
    details (headers, TLS files, timeout, compression) and the sampler are read by the SDK
    from the process environment, as the OpenTelemetry specification defines them.
    Raises ValueError for an exporter or protocol this server does not ship."""
    capture = _is_true(environ.get(CAPTURE_CONTENT_VARIABLE, ""))
    if _is_true(environ.get("OTEL_SDK_DISABLED", "")):
        return Tracing(trace.NoOpTracerProvider(), capture)
    exporters = span_exporters(environ)  # first, so a bad setting fails before anything starts
    # Nothing to export to: spans keep their ids but are not recorded (recording every span
    # cost ~12 % of a BuildContext's CPU for nothing).
    sampler = None if exporters else sampling.ALWAYS_OFF
    provider = SdkTracerProvider(sampler=sampler, resource=Resource.create(resource_attributes(environ)))
    for exporter in exporters:
        # Batching keeps export (network or console I/O) off the event loop.
        provider.add_span_processor(BatchSpanProcessor(exporter))
    return Tracing(provider, capture)


@functools.cache
def no_tracing() -> Tracing:
    """For tools and tests: spans get real ids but are never recorded nor exported."""
    provider = SdkTracerProvider(
        sampler=sampling.ALWAYS_OFF,
        resource=Resource({SERVICE_NAME: DEFAULT_SERVICE_NAME}),
        shutdown_on_exit=False,
    )
    return Tracing(provider)


def server_interceptor(tracing: Tracing) -> grpc.aio.ServerInterceptor[Any, Any]:
    """A SERVER span per RPC, named "/package.Service/Method", health checks excluded. Put it
    first among the interceptors so calls that the others reject are traced too."""
    interceptor: grpc.aio.ServerInterceptor[Any, Any] = aio_server_interceptor(
        tracer_provider=tracing.provider, filter_=filters.negate(filters.health_check())
    )
    _OTEL_CONTEXT_LOG.addFilter(_cancelled_stream_detach)
    return interceptor


_OTEL_CONTEXT_LOG = logging.getLogger("opentelemetry.context")


def _cancelled_stream_detach(record: logging.LogRecord) -> bool:
    """When a client cancels a server stream, grpc closes the instrumentation's generator
    from another context and OpenTelemetry logs "Failed to detach context" at ERROR (the
    span still ends). That one known case is noise for operators; anything else passes."""
    error = record.exc_info[1] if record.exc_info else None
    cause = error.__context__ if error is not None else None
    return not (isinstance(error, ValueError) and isinstance(cause, GeneratorExit))


def span_exporters(environ: Mapping[str, str]) -> list[SpanExporter]:
    return [_exporter(name, environ) for name in exporter_names(environ)]


def exporter_names(environ: Mapping[str, str]) -> list[str]:
    """OTEL_TRACES_EXPORTER if set; otherwise OTLP when an endpoint is set, else none (the
    specification's default is OTLP, but this server exports nothing unless configured)."""
    listed = environ.get("OTEL_TRACES_EXPORTER", "")
    names = [name.strip().lower() for name in listed.split(",") if name.strip()]
    unknown = [name for name in names if name not in EXPORTERS]
    if unknown:
        choices = ", ".join(EXPORTERS)
        raise ValueError(f"OTEL_TRACES_EXPORTER: unsupported {unknown[0]!r}; use one of {choices}")
    if not names:
        return ["otlp"] if _otlp_endpoint(environ) else []
    return [] if "none" in names else list(dict.fromkeys(names))


def resource_attributes(environ: Mapping[str, str]) -> dict[str, AttributeValue]:
    """OTEL_RESOURCE_ATTRIBUTES, with the service name from OTEL_SERVICE_NAME, from there, or
    "episodic"."""
    attributes: dict[str, AttributeValue] = {}
    for pair in environ.get("OTEL_RESOURCE_ATTRIBUTES", "").split(","):
        key, sep, value = pair.partition("=")
        if sep and key.strip():
            attributes[urllib.parse.unquote(key.strip())] = urllib.parse.unquote(value.strip())
    attributes[SERVICE_NAME] = (
        environ.get("OTEL_SERVICE_NAME") or attributes.get(SERVICE_NAME) or DEFAULT_SERVICE_NAME
    )
    return attributes


def _exporter(name: str, environ: Mapping[str, str]) -> SpanExporter:
    if name == "console":
        return ConsoleSpanExporter()
    _require_grpc_protocol(environ)
    return OTLPSpanExporter(endpoint=_otlp_endpoint(environ) or None)  # connects lazily


def _otlp_endpoint(environ: Mapping[str, str]) -> str:
    # For OTLP/gRPC the signal-specific and the general endpoint are used as given.
    return environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "")


def _require_grpc_protocol(environ: Mapping[str, str]) -> None:
    """Only the OTLP/gRPC exporter is installed; sending gRPC to an HTTP collector port
    would fail at every export, so refuse it up front."""
    for variable in ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"):
        protocol = environ.get(variable, "").strip().lower()
        if protocol and protocol != "grpc":
            raise ValueError(f"{variable}: {protocol!r} is not supported; this server exports OTLP over grpc")
        if protocol:
            return


def _is_true(value: str) -> bool:
    return value.strip().lower() == "true"
