"""Tracing configuration from the standard OTEL_* variables: nothing is exported unless an
exporter is configured, yet spans always carry trace ids (for logs). The core's own default
is the API's no-op."""

from __future__ import annotations

import argparse
import re

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NoOpTracerProvider, SpanKind, StatusCode

from episodic import config
from episodic.bootstrap.adapters import load_tracing
from episodic.config.concerns import TelemetrySettings
from episodic.telemetry.setup import exporter_names, span_exporters, tracing_from_env
from episodic.telemetry.tracing import Tracing, current_trace_id, no_tracing

HEX_TRACE_ID = re.compile(r"[0-9a-f]{32}")


def recording() -> tuple[Tracing, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return Tracing(provider), exporter


def test_unconfigured_tracing_exports_nothing_but_still_makes_trace_ids() -> None:
    tracing = tracing_from_env({})
    assert isinstance(tracing.provider, TracerProvider)
    assert span_exporters({}) == []
    rpc = tracing.provider.get_tracer("rpc").start_as_current_span("/episodic.v1.X/Y")  # as the interceptor
    with rpc, tracing.span("work") as child:
        assert HEX_TRACE_ID.fullmatch(tracing.trace_id())
        assert not child.is_recording()
    tracing.shutdown()


@pytest.mark.parametrize(
    "environ",
    [
        {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4317"},
        {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4317"},
        {"OTEL_TRACES_EXPORTER": "otlp"},
        {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
    ],
)
def test_an_otlp_endpoint_or_exporter_selects_the_otlp_grpc_exporter(environ: dict[str, str]) -> None:
    exporters = span_exporters(environ)  # built only: the channel connects on first export
    assert [type(e) for e in exporters] == [OTLPSpanExporter]
    for exporter in exporters:
        exporter.shutdown()
    tracing_from_env(environ).shutdown()


def test_console_selects_the_console_exporter() -> None:
    assert [type(e) for e in span_exporters({"OTEL_TRACES_EXPORTER": "console"})] == [ConsoleSpanExporter]


@pytest.mark.parametrize(
    "environ",
    [
        {"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4317"},
        {"OTEL_TRACES_EXPORTER": " None "},
        {"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"},  # no endpoint, no exporter: not checked
    ],
)
def test_none_or_no_endpoint_means_no_exporter(environ: dict[str, str]) -> None:
    assert exporter_names(environ) == []


def test_several_exporters_may_be_listed() -> None:
    assert exporter_names({"OTEL_TRACES_EXPORTER": "console, otlp,console"}) == ["console", "otlp"]


@pytest.mark.parametrize(
    ("environ", "named"),
    [
        ({"OTEL_TRACES_EXPORTER": "zipkin"}, "OTEL_TRACES_EXPORTER"),
        (
            {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"},
            "OTEL_EXPORTER_OTLP_PROTOCOL",
        ),
        (
            {
                "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318",
                "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json",
            },
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
        ),
    ],
)
def test_an_exporter_this_server_does_not_ship_is_refused(environ: dict[str, str], named: str) -> None:
    with pytest.raises(ValueError, match=named):
        tracing_from_env(environ)


def test_a_disabled_sdk_makes_no_spans() -> None:
    tracing = tracing_from_env({"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "console"})
    assert isinstance(tracing.provider, NoOpTracerProvider)
    with tracing.span("ignored") as span:
        assert not span.is_recording()
        assert tracing.trace_id() == ""
    tracing.shutdown()


@pytest.mark.parametrize(
    ("environ", "service"),
    [
        ({}, "episodic"),
        ({"OTEL_SERVICE_NAME": "memory-eu"}, "memory-eu"),
        ({"OTEL_RESOURCE_ATTRIBUTES": "service.name=from-attrs,deployment.environment=prod"}, "from-attrs"),
        ({"OTEL_SERVICE_NAME": "wins", "OTEL_RESOURCE_ATTRIBUTES": "service.name=loses"}, "wins"),
    ],
)
def test_the_service_name_defaults_to_episodic(environ: dict[str, str], service: str) -> None:
    tracing = tracing_from_env(environ)
    assert isinstance(tracing.provider, TracerProvider)
    assert tracing.provider.resource.attributes["service.name"] == service
    tracing.shutdown()


def test_resource_attributes_are_url_decoded() -> None:
    tracing = tracing_from_env({"OTEL_RESOURCE_ATTRIBUTES": "team=agents%20core,broken,=x"})
    assert isinstance(tracing.provider, TracerProvider)
    assert tracing.provider.resource.attributes["team"] == "agents core"
    tracing.shutdown()


@pytest.mark.parametrize(
    ("value", "captured"), [("true", True), ("TRUE", True), ("false", False), ("1", False)]
)
def test_content_capture_is_opt_in(value: str, captured: bool) -> None:
    assert not tracing_from_env({}).capture_content
    environ = {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": value}
    assert tracing_from_env(environ).capture_content is captured


def test_there_is_no_trace_id_outside_spans() -> None:
    assert current_trace_id() == ""
    assert no_tracing().trace_id() == ""


def test_spans_are_internal_children_of_the_current_span() -> None:
    tracing, exporter = recording()
    with tracing.span("outer") as outer, tracing.span("inner", {"gen_ai.memory.record.count": 2}):
        trace_id = tracing.trace_id()
    inner, outer_done = exporter.get_finished_spans()
    assert inner.kind is SpanKind.INTERNAL and inner.attributes == {"gen_ai.memory.record.count": 2}
    assert inner.parent is not None and inner.parent.span_id == outer.get_span_context().span_id
    assert f"{outer_done.context.trace_id:032x}" == trace_id


def test_an_exception_leaving_a_span_is_recorded_as_an_error() -> None:
    tracing, exporter = recording()
    with pytest.raises(LookupError), tracing.span("failing"):
        raise LookupError("no such episode")
    (span,) = exporter.get_finished_spans()
    assert span.status.status_code is StatusCode.ERROR
    assert [event.name for event in span.events] == ["exception"]


def test_the_core_default_is_the_api_no_op() -> None:
    tracing = no_tracing()
    assert tracing is no_tracing()  # shared: services default to it
    assert isinstance(tracing.provider, NoOpTracerProvider)
    with tracing.span("nothing") as span:
        assert not span.is_recording() and tracing.trace_id() == ""
    tracing.shutdown()  # nothing to release


def test_shutdown_flushes_what_the_setup_built() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(BatchSpanProcessor(exporter))
    tracing = Tracing(provider, release=provider.shutdown)
    with tracing.span("queued"):
        pass
    tracing.shutdown()
    assert [span.name for span in exporter.get_finished_spans()] == ["queued"]


def test_config_captures_the_otel_variables_for_the_composition_root() -> None:
    parser = argparse.ArgumentParser()
    config.add_flags(parser, "serve")
    environ = {"OTEL_TRACES_EXPORTER": "zipkin", "EPISODIC_DEV_TENANT": "t", "HOME": "/root"}
    settings = config.load(environ, parser.parse_args([]))
    assert settings.otel_environ == {"OTEL_TRACES_EXPORTER": "zipkin"}
    with pytest.raises(config.ConfigError, match="OTEL_TRACES_EXPORTER"):
        load_tracing(TelemetrySettings.of(settings))
