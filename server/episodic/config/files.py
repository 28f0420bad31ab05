"""The files settings name, read once at start-up: the TLS PEM files, the API keys file, and
any other file a setting or flag names; a file that cannot be read (or holds no PEM of the
kind wanted) is a ConfigError naming the setting."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from episodic.config.concerns import CallerSettings, TlsSettings
from episodic.config.options import ConfigError


@dataclass(frozen=True, slots=True)
class TlsMaterial:
    """The PEM bytes of the TLS files; `client_ca` set means clients must present a
    certificate it signed."""

    certificate_chain: bytes
    private_key: bytes
    client_ca: bytes | None = None


def api_key_text(callers: CallerSettings) -> str:
    """Inline keys plus the keys file's content (read here, once, at start-up)."""
    text = callers.api_keys
    if callers.api_keys_file:
        try:
            text += "\n" + Path(callers.api_keys_file).read_text()
        except OSError as exc:
            raise ConfigError(f"api_keys_file: cannot read {callers.api_keys_file}: {exc}") from exc
    return text


def tls_material(tls: TlsSettings) -> TlsMaterial | None:
    """The TLS files' content (read here, once, at start-up); None serves plaintext."""
    check_tls(tls)
    if not tls.tls_cert_file:
        return None
    client_ca = tls.tls_client_ca_file
    return TlsMaterial(
        _read_pem("tls_cert_file", tls.tls_cert_file, _PEM_CERTIFICATE),
        _read_pem("tls_key_file", tls.tls_key_file, _PEM_PRIVATE_KEY),
        _read_pem("tls_client_ca_file", client_ca, _PEM_CERTIFICATE) if client_ca else None,
    )


def check_tls(tls: TlsSettings) -> None:
    """A certificate without its key (or the reverse) is a half-done setup, never plaintext."""
    if tls.tls_cert_file and not tls.tls_key_file:
        raise ConfigError("tls_key_file: required when tls_cert_file is set")
    if tls.tls_key_file and not tls.tls_cert_file:
        raise ConfigError("tls_cert_file: required when tls_key_file is set")
    if tls.tls_client_ca_file and not tls.tls_cert_file:
        raise ConfigError("tls_client_ca_file: mutual TLS needs tls_cert_file and tls_key_file too")


_PEM_CERTIFICATE = (b"-----BEGIN CERTIFICATE-----", "certificate")
_PEM_PRIVATE_KEY = (b"PRIVATE KEY-----", "private key")  # PKCS#8, EC or RSA


def _read_pem(name: str, path: str, expected: tuple[bytes, str]) -> bytes:
    """gRPC reports a file that is not PEM (or a swapped cert and key) only as "failed to
    bind", so the shape is checked here, where the message can name the setting."""
    data = read_named_file(name, path)
    marker, what = expected
    if marker not in data:
        raise ConfigError(f"{name}: {path} holds no PEM {what}")
    return data


def read_named_file(name: str, path: str) -> bytes:
    """A file a setting or flag names; ConfigError names the setting if it cannot be read."""
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(f"{name}: cannot read {path}: {exc}") from exc
