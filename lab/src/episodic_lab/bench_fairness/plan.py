"""What the orchestrator hands tenant A's process (a Plan, as JSON on its stdin) and what
that process hands back (a Tally, as one JSON line on its stdout)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field


@dataclass(frozen=True, slots=True)
class Plan:
    abuse: str
    target: str  # gRPC host:port
    inspector_port: int
    api_key: str  # tenant A's
    seconds: float
    honour_retry: bool
    agent_id: str
    user_id: str
    episodes: tuple[str, ...]  # small open episodes (flood, watches)
    big_episode: str  # ~1 MB rendered context (unread-streams)
    where_episode: str  # many large messages (inspector-searches)
    where_phrase: str

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> Plan:
        raw = json.loads(text)
        return cls(**{**raw, "episodes": tuple(raw["episodes"])})


@dataclass(slots=True)
class Tally:
    """Tenant A's calls: completed, refused (RESOURCE_EXHAUSTED, HTTP 429/503), other errors;
    `notes` hold an abuse's own figures (sockets closed, streams held...)."""

    done: int = 0
    refused: int = 0
    errors: int = 0
    first_error: str = ""
    notes: dict[str, float] = field(default_factory=dict)

    def error(self, problem: str) -> None:
        self.errors += 1
        self.first_error = self.first_error or problem[:200]

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> Tally:
        return cls(**json.loads(text))
