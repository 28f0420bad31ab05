"""The OpenTelemetry SDK behind `Tracing`, built once from the standard OTEL_* variables.
Only the composition root (and tests) import this module: the core sees the API alone.

Spans are always made with the SDK, so trace ids exist for the access log and the stored
model calls even when nothing is exported; they are recorded and exported only when an
exporter is configured."""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider as SdkTracerProvider
from opentelemetry.sdk.trace import sampling
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter

from episodic.telemetry.tracing import AttributeValue, Tracing

DEFAULT_SERVICE_NAME = "episodic"
CAPTURE_CONTENT_VARIABLE = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
EXPORTERS = ("otlp", "console", "none")


def tracing_from_env(environ: Mapping[str, str]) -> Tracing:
    """Reads the OTEL_* variables that shape tracing (see docs/observability.md); its
    `shutdown` exports what is still queued. The OTLP exporter's own details (headers, TLS
    files, timeout, compression) and the sampler are read by the SDK from the process
    environment, as the OpenTelemetry specification defines them.
    Raises ValueError for an exporter or protocol this server does not ship."""
    capture = _is_true(environ.get(CAPTURE_CONTENT_VARIABLE, ""))
    if _is_true(environ.get("OTEL_SDK_DISABLED", "")):
        return Tracing(trace.NoOpTracerProvider(), capture, records=False)
    exporters = span_exporters(environ)  # first, so a bad setting fails before anything starts
    # Nothing to export to: spans keep their ids but are not recorded (recording every span
    # cost ~12 % of a BuildContext's CPU for nothing).
    sampler = None if exporters else sampling.ALWAYS_OFF
    provider = SdkTracerProvider(sampler=sampler, resource=Resource.create(resource_attributes(environ)))
    for exporter in exporters:
        # Batching keeps export (network or console I/O) off the event loop.
        provider.add_span_processor(BatchSpanProcessor(exporter))
    return Tracing(provider, capture, records=bool(exporters), release=provider.shutdown)


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
