"""Observability adapters: OpenTelemetry tracing (the SDK, the gRPC server instrumentation
and the OTLP exporter). Only service and API code may use it; the domain stays free of it."""
