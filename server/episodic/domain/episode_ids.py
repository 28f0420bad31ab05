"""The episode (and memory) ids a key restricted to some agents creates. Ids are unique per
tenant, so a key that could create any id it names would learn, from ALREADY_EXISTS, which
ids other agents hold. Such a key resumes the episodes of its own agents by id; any other id it
names is a name in the agent's own space, from which the stored id is derived: a fresh
id and another agent's id get the same answer, and a retry finds what the first call
created (docs/api.md, agent-restricted keys)."""

from __future__ import annotations

import hashlib


def agent_scoped_id(agent_id: str, requested: str, prefix: str = "ep_") -> str:
    """Same shape as the server's generated ids (`ep_` or `mem_` + 32 hex digits)."""
    digest = hashlib.sha256(f"{agent_id}\x00{requested}".encode()).hexdigest()
    return f"{prefix}{digest[:32]}"
