"""The shape of one corpus: N episodes of one agent in one tenant, spread evenly over
U = min(10k, N/10) users, with the ids the SQL rows and the index keys share."""

from __future__ import annotations

from dataclasses import dataclass

from episodic.domain.recall import Scope

MAX_USERS = 10_000
EPISODES_PER_USER_AT_LEAST = 10


@dataclass(frozen=True, slots=True)
class Layout:
    episodes: int
    tenant_id: str
    agent_id: str

    @property
    def users(self) -> int:
        return max(1, min(MAX_USERS, self.episodes // EPISODES_PER_USER_AT_LEAST))

    def user_of(self, episode: int) -> int:
        """Episodes are numbered user by user, so each user's rows are adjacent."""
        return episode * self.users // self.episodes

    def episodes_of(self, user: int) -> range:
        n, u = self.episodes, self.users
        return range(_ceil_div(user * n, u), _ceil_div((user + 1) * n, u))

    def user_id(self, user: int) -> str:
        return f"user-{user:05d}"

    def episode_id(self, episode: int) -> str:
        # The length of a real id ("ep_" + 32 hex digits); numbered, so inserts append.
        return f"ep_{episode:032x}"

    def scope(self, user: int) -> Scope:
        return Scope(self.tenant_id, self.agent_id, self.user_id(user))


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)
