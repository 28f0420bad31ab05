"""API keys: each maps to a tenant. Only SHA-256 hashes of keys are configured or held;
keys are random 256-bit tokens, so a plain digest is enough to make the stored form
useless to a reader of the config."""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass

from episodic.domain.model import Caller
from episodic.domain.validation import ID_PATTERN

_ENTRY = re.compile(r"(?P<tenant>[^=\s]+)\s*=\s*sha256:(?P<digest>[0-9a-f]{64})")
KEY_PREFIX = "epk_"


class KeyConfigError(ValueError):
    """The key configuration cannot be parsed; the message names the entry."""


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def new_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def config_line(tenant_id: str, key: str) -> str:
    return f"{tenant_id}=sha256:{hash_key(key)}"


@dataclass(frozen=True, slots=True)
class KeyRing:
    """Hash of key -> tenant."""

    tenants_by_hash: dict[str, str]

    @classmethod
    def parse(cls, text: str) -> KeyRing:
        """Entries `tenant_id=sha256:<hex>`, separated by newlines or commas; # comments."""
        found: dict[str, str] = {}
        for entry in _entries(text):
            match = _ENTRY.fullmatch(entry)
            if match is None or not ID_PATTERN.fullmatch(match["tenant"]):
                raise KeyConfigError(f"bad API key entry {entry[:40]!r}: want tenant_id=sha256:<64 hex>")
            found[match["digest"]] = match["tenant"]
        return cls(found)

    def caller_for(self, key: str) -> Caller | None:
        tenant = self.tenants_by_hash.get(hash_key(key))
        return Caller(tenant) if tenant is not None else None

    def __len__(self) -> int:
        return len(self.tenants_by_hash)


def _entries(text: str) -> list[str]:
    lines = (line.split("#", 1)[0] for line in text.splitlines())
    return [part.strip() for line in lines for part in line.split(",") if part.strip()]
