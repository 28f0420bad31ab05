"""`episodic healthcheck`: exit 0 when the local server reports SERVING (for container
HEALTHCHECKs and probes that cannot speak gRPC themselves). Against a TLS server it needs
TLS too: the CA that signed the server's certificate and, for mutual TLS, a client
certificate."""

from __future__ import annotations

from dataclasses import dataclass

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from episodic.config import ConfigError, read_named_file


@dataclass(frozen=True, slots=True)
class ProbeTls:
    """Trusted roots (None: the system's), an optional client certificate, and the name the
    server's certificate must carry when it is not the probed host (e.g. 127.0.0.1)."""

    root_certificates: bytes | None = None
    certificate_chain: bytes | None = None
    private_key: bytes | None = None
    server_name: str = ""


def probe_tls(ca: str, cert: str, key: str, server_name: str, wanted: bool) -> ProbeTls | None:
    """From the command's flags (file paths, "" when not given); None probes in plaintext."""
    if bool(cert) != bool(key):
        raise ConfigError("--tls-cert and --tls-key: give both or neither")
    if not (wanted or ca or cert or server_name):
        return None
    return ProbeTls(
        read_named_file("--tls-ca", ca) if ca else None,
        read_named_file("--tls-cert", cert) if cert else None,
        read_named_file("--tls-key", key) if key else None,
        server_name,
    )


def probe_target(address: str) -> str:
    """A wildcard listen address is probed on loopback."""
    host, _, port = address.rpartition(":")
    return f"127.0.0.1:{port}" if host in {"0.0.0.0", "[::]", "::"} else address


def check(address: str, timeout: float = 3.0, tls: ProbeTls | None = None) -> bool:
    with _channel(probe_target(address), tls) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        try:
            reply = stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=timeout)
        except grpc.RpcError:
            return False
    return bool(reply.status == health_pb2.HealthCheckResponse.SERVING)


def _channel(target: str, tls: ProbeTls | None) -> grpc.Channel:
    if tls is None:
        return grpc.insecure_channel(target)
    credentials = grpc.ssl_channel_credentials(tls.root_certificates, tls.private_key, tls.certificate_chain)
    options = [("grpc.ssl_target_name_override", tls.server_name)] if tls.server_name else []
    return grpc.secure_channel(target, credentials, options=options)
