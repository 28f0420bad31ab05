"""`episodic healthcheck`: prints what the local server's health service said (SERVING,
NOT_SERVING, UNKNOWN) or why it said nothing (unreachable, TLS trouble), one line, and
exits 0 only on SERVING (for container HEALTHCHECKs and probes that cannot speak gRPC
themselves). Against a TLS server it needs TLS too: the CA that signed the server's
certificate and, for mutual TLS, a client certificate."""

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


@dataclass(frozen=True, slots=True)
class Seen:
    """What a probe saw: the status's name, or why there was none, as one line."""

    line: str
    serving: bool = False


def check(address: str, timeout: float = 3.0, tls: ProbeTls | None = None) -> Seen:
    target = probe_target(address)
    with client_channel(target, tls) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        try:
            reply = stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=timeout)
        except grpc.RpcError as exc:
            return Seen(_trouble(exc, target, tls, timeout))
    status = health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)
    return Seen(status, reply.status == health_pb2.HealthCheckResponse.SERVING)


_TLS_WORDS = ("ssl", "tls", "handshake", "certificate", "verification")


def _trouble(exc: grpc.RpcError, target: str, tls: ProbeTls | None, timeout: float) -> str:
    code = exc.code() if isinstance(exc, grpc.Call) else grpc.StatusCode.UNKNOWN
    details = (exc.details() if isinstance(exc, grpc.Call) else "") or ""
    if any(word in details.lower() for word in _TLS_WORDS):
        return f"TLS failed with {target}: {_first_line(details)}"
    if code is grpc.StatusCode.DEADLINE_EXCEEDED:
        return f"unreachable: {target} gave no answer within {timeout:g} s"
    if code is grpc.StatusCode.UNAVAILABLE:
        # A TLS server closes a plaintext probe's connection without a word.
        closed = tls is None and "socket closed" in details.lower()
        hint = " (a TLS server? probe it with --tls-ca or --tls)" if closed else ""
        return f"unreachable: {target}: {_first_line(details) or 'unavailable'}{hint}"
    if code is grpc.StatusCode.UNIMPLEMENTED:
        return f"no health service at {target}"
    return f"{code.name} from {target}: {_first_line(details)}"


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""


def client_channel(target: str, tls: ProbeTls | None, max_receive_bytes: int = 0) -> grpc.Channel:
    """The channel of the command-line clients (healthcheck, export, import)."""
    options: list[tuple[str, str | int]] = []
    if max_receive_bytes:
        options.append(("grpc.max_receive_message_length", max_receive_bytes))
    if tls is None:
        return grpc.insecure_channel(target, options=options)
    credentials = grpc.ssl_channel_credentials(tls.root_certificates, tls.private_key, tls.certificate_chain)
    if tls.server_name:
        options.append(("grpc.ssl_target_name_override", tls.server_name))
    return grpc.secure_channel(target, credentials, options=options)
