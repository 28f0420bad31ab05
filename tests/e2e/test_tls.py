"""TLS by configuration, against certificates made here with openssl: a self-signed CA,
a server certificate for 127.0.0.1/localhost, and client certificates for mutual TLS."""

from __future__ import annotations

import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest

from episodic.config import Settings
from episodic.v1 import agent_service_pb2
from episodic.v1.agent_service_pb2_grpc import AgentServiceStub
from tests.e2e.helpers import assert_serving, clean_environment, rpc_error, run_process
from tests.e2e.test_server_process import EPISODIC, dev_flags, serving
from tests.server_harness import KEY_A, RunningServer, bearer, running_server, settings_for

SERVER_EXTENSIONS = "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n"
CLIENT_EXTENSIONS = "extendedKeyUsage=clientAuth\n"


@dataclass(frozen=True)
class Pki:
    """PEM files: one CA that signed the server and a client, another that signed a stranger."""

    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    stranger_cert: Path
    stranger_key: Path

    def read(self, name: str) -> bytes:
        path: Path = getattr(self, name)
        return path.read_bytes()


def _openssl(*args: str | Path) -> None:
    subprocess.run(["openssl", *map(str, args)], check=True, capture_output=True)


def _make_ca(directory: Path, name: str) -> tuple[Path, Path]:
    cert, key = directory / f"{name}.pem", directory / f"{name}.key"
    _openssl(
        "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-keyout", key, "-out", cert, "-days", "1", "-subj", f"/CN={name}",
        "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign",
    )  # fmt: skip
    return cert, key


def _make_leaf(directory: Path, name: str, ca: tuple[Path, Path], extensions: str) -> tuple[Path, Path]:
    cert, key, csr, ext = (directory / f"{name}{suffix}" for suffix in (".pem", ".key", ".csr", ".ext"))
    ext.write_text(extensions)
    _openssl(
        "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-keyout", key, "-out", csr, "-subj", f"/CN={name}",
    )  # fmt: skip
    _openssl(
        "x509", "-req", "-in", csr, "-CA", ca[0], "-CAkey", ca[1], "-CAcreateserial",
        "-out", cert, "-days", "1", "-extfile", ext,
    )  # fmt: skip
    return cert, key


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    directory = tmp_path_factory.mktemp("pki")
    ca, other_ca = _make_ca(directory, "test-ca"), _make_ca(directory, "other-ca")
    server = _make_leaf(directory, "server", ca, SERVER_EXTENSIONS)
    client = _make_leaf(directory, "client", ca, CLIENT_EXTENSIONS)
    stranger = _make_leaf(directory, "stranger", other_ca, CLIENT_EXTENSIONS)
    return Pki(ca[0], *server, *client, *stranger)


def tls_settings(database_url: str, pki: Pki, *, mutual: bool = False) -> Settings:
    return settings_for(
        database_url,
        tls_cert_file=str(pki.server_cert),
        tls_key_file=str(pki.server_key),
        tls_client_ca_file=str(pki.ca) if mutual else "",
    )


def tls_channel(server: RunningServer, pki: Pki, client: str = "") -> grpc.aio.Channel:
    """Trusts the test CA; `client` ("client" or "stranger") presents that certificate."""
    key, cert = (pki.read(f"{client}_key"), pki.read(f"{client}_cert")) if client else (None, None)
    credentials = grpc.ssl_channel_credentials(pki.read("ca"), key, cert)
    return grpc.aio.secure_channel(server.address, credentials)


@asynccontextmanager
async def tls_server(database_url: str, pki: Pki, *, mutual: bool = False) -> AsyncIterator[RunningServer]:
    async with running_server(tls_settings(database_url, pki, mutual=mutual)) as server:
        yield server


async def list_agents(channel: grpc.aio.Channel) -> object:
    request = agent_service_pb2.ListAgentsRequest()
    return await AgentServiceStub(channel).ListAgents(request, metadata=bearer(KEY_A), timeout=10)


async def test_a_tls_server_answers_a_client_that_trusts_its_ca(sqlite_url: str, pki: Pki) -> None:
    async with tls_server(sqlite_url, pki) as server, tls_channel(server, pki) as channel:
        await assert_serving(channel, bearer(KEY_A))
        await list_agents(channel)


async def test_a_plaintext_client_cannot_talk_to_a_tls_server(sqlite_url: str, pki: Pki) -> None:
    async with tls_server(sqlite_url, pki) as server, server.channel() as plaintext:
        err = await rpc_error(list_agents(plaintext))
    assert err.code() == grpc.StatusCode.UNAVAILABLE


async def test_mutual_tls_serves_a_client_whose_certificate_the_ca_signed(sqlite_url: str, pki: Pki) -> None:
    async with (
        tls_server(sqlite_url, pki, mutual=True) as server,
        tls_channel(server, pki, "client") as channel,
    ):
        await assert_serving(channel, bearer(KEY_A))
        await list_agents(channel)


@pytest.mark.parametrize("client", ["", "stranger"], ids=["no certificate", "certificate of another CA"])
async def test_mutual_tls_refuses_a_client_without_a_certificate_the_ca_signed(
    sqlite_url: str, pki: Pki, client: str
) -> None:
    async with (
        tls_server(sqlite_url, pki, mutual=True) as server,
        tls_channel(server, pki, client) as channel,
    ):
        err = await rpc_error(list_agents(channel))
    assert err.code() == grpc.StatusCode.UNAVAILABLE


def mtls_flags(pki: Pki) -> tuple[str, ...]:
    return (
        "--tls-cert-file", str(pki.server_cert), "--tls-key-file", str(pki.server_key),
        "--tls-client-ca-file", str(pki.ca),
    )  # fmt: skip


def probe_flags(pki: Pki) -> tuple[str, ...]:
    """`episodic healthcheck` as a client of the mutual-TLS server."""
    return ("--tls-ca", str(pki.ca), "--tls-cert", str(pki.client_cert), "--tls-key", str(pki.client_key))


async def test_episodic_serve_logs_mutual_tls_and_the_healthcheck_probes_it_over_tls(
    tmp_path: Path, pki: Pki
) -> None:
    database_url = f"sqlite:///{tmp_path / 'tls.db'}"
    async with serving(*dev_flags(database_url), *mtls_flags(pki), cwd=tmp_path) as server:
        probe = (*EPISODIC, "healthcheck", "--address", server.address)
        over_tls = await run_process(*probe, *probe_flags(pki), env=clean_environment())
        in_plaintext = await run_process(*probe, env=clean_environment())
        assert await server.terminate() == 0
    assert over_tls.returncode == 0, over_tls.stderr
    assert in_plaintext.returncode == 1
    serving_line = next(e for e in server.logs() if e.get("message") == "serving")
    assert serving_line["transport"] == "mtls"
