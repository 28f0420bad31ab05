"""Observability: `tracing` is what the core uses (the OpenTelemetry API only); `setup` (the
SDK and its exporters) and `instrumentation` (the gRPC server spans) are wired by the
composition root alone. The domain stays free of all of it."""
