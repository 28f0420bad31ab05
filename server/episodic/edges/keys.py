"""API keys: each maps to a tenant and, optionally, to the agents it may use. Only SHA-256
hashes of keys are configured or held; keys are random 256-bit tokens, so a plain digest is
enough to make the stored form useless to a reader of the config.

An entry is `tenant_id=sha256:<hex>`, or `tenant_id=sha256:<hex>;agents=a|b` for a key
restricted to agents a and b. `;` and `|` appear neither in ids nor in the list syntax
(entries are separated by commas or newlines), so the two cannot be confused. A trailing
`;knowledge=write` lets the key create, update and delete its agents' documents; without
it a key may read and search them only."""

from __future__ import annotations

import hashlib
import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass

from episodic.domain.model import Caller
from episodic.domain.validation import ID_PATTERN

_ENTRY = re.compile(
    r"(?P<tenant>[^=\s]+)\s*=\s*sha256:(?P<digest>[0-9a-f]{64})(?:\s*;\s*agents\s*=(?P<agents>[^;]*))?"
    r"(?:\s*;\s*knowledge\s*=\s*(?P<knowledge>write|read)\s*)?"
)
_ENTRY_RULE = (
    "want tenant_id=sha256:<64 hex>, optionally followed by ;agents=AGENT|AGENT and then by ;knowledge=write"
)
AGENT_SEPARATOR = "|"
KEY_PREFIX = "epk_"


class KeyConfigError(ValueError):
    """The key configuration cannot be parsed; the message names the entry."""


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def new_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def config_line(
    tenant_id: str, key: str, agents: Sequence[str] = (), *, knowledge_write: bool = False
) -> str:
    """The entry for `key`; with `agents`, the key may use only those agents; with
    `knowledge_write`, it may also write their documents."""
    line = f"{tenant_id}=sha256:{hash_key(key)}"
    if agents:
        line += f";agents={AGENT_SEPARATOR.join(agents)}"
    return line + ";knowledge=write" if knowledge_write else line


@dataclass(frozen=True, slots=True)
class KeyRing:
    """Hash of key -> the caller it authenticates."""

    callers_by_hash: dict[str, Caller]

    @classmethod
    def parse(cls, text: str) -> KeyRing:
        """Entries separated by newlines or commas; # starts a comment."""
        return cls(dict(map(_parse_entry, _entries(text))))

    def caller_for(self, key: str) -> Caller | None:
        return self.callers_by_hash.get(hash_key(key))

    def caller_for_header(self, authorization: str | None, dev: Caller | None) -> Caller | None:
        """An HTTP request's caller from its `Authorization: Bearer <key>` header: none at
        all is `dev` (the --insecure-dev tenant, or None); a malformed or unknown key is
        None even in dev mode, so a typo never reads or writes the dev tenant."""
        if authorization is None:
            return dev
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None
        return self.caller_for(token.strip())

    def __len__(self) -> int:
        return len(self.callers_by_hash)


def _parse_entry(entry: str) -> tuple[str, Caller]:
    match = _ENTRY.fullmatch(entry)
    if match is None or not ID_PATTERN.fullmatch(match["tenant"]):
        raise KeyConfigError(f"bad API key entry {entry[:40]!r}: {_ENTRY_RULE}")
    agents = None if match["agents"] is None else _agent_set(match["agents"], entry)
    return match["digest"], Caller(match["tenant"], agents, writes_knowledge=match["knowledge"] == "write")


def _agent_set(text: str, entry: str) -> frozenset[str]:
    """An empty list is refused: a key that may use no agent is a typo, not a policy."""
    agents = [a.strip() for a in text.split(AGENT_SEPARATOR)]
    bad = [a for a in agents if not ID_PATTERN.fullmatch(a)]
    if bad:
        raise KeyConfigError(f"bad agent id {bad[0]!r} in API key entry {entry[:40]!r}: {_ENTRY_RULE}")
    return frozenset(agents)


def _entries(text: str) -> list[str]:
    lines = (line.split("#", 1)[0] for line in text.splitlines())
    return [part.strip() for line in lines for part in line.split(",") if part.strip()]
