"""The MCP list_users tool over in-memory fakes: a page of an agent's users with their counts,
the next page by the token it returned, and the service's refusals as tool errors."""

from __future__ import annotations

from typing import Any

import pytest

from episodic.domain.model import Caller
from episodic.edges.mcp import arguments as args
from episodic.edges.mcp.tools import TOOLS_BY_NAME
from episodic.errors import PermissionDenied
from tests.unit.use_cases import CALLER, TENANT, UseCases, use_cases


def listing(**given: Any) -> args.ListUsersArguments:
    return args.ListUsersArguments.model_validate(given)


def rows(data: dict[str, object]) -> list[dict[str, Any]]:
    found = data["users"]
    assert isinstance(found, list)
    return found


@pytest.fixture
async def app() -> UseCases:
    built = use_cases()
    await built.new_agent()
    return built


async def test_list_users_pages_an_agents_users_with_their_counts(app: UseCases) -> None:
    for user in ("bob", "alice", "carol"):
        await app.open(user_id=user)
    tool = TOOLS_BY_NAME["list_users"]
    assert tool.hints.read_only_hint and tool.offered_to(Caller(TENANT, writes_knowledge=False))
    first = await tool.run(app.services, CALLER, listing(agent_id="helper", limit=2))
    assert [(u["user_id"], u["episodes"], u["open_episodes"]) for u in rows(first.data)] == [
        ("alice", 1, 1),
        ("bob", 1, 1),
    ]
    token = first.data["next_page_token"]
    assert isinstance(token, str) and token
    rest = await tool.run(app.services, CALLER, listing(agent_id="helper", page_token=token))
    assert [u["user_id"] for u in rows(rest.data)] == ["carol"]
    assert rest.data["next_page_token"] == ""
    restricted = Caller(TENANT, agents=frozenset({"other"}))
    with pytest.raises(PermissionDenied):
        await tool.run(app.services, restricted, listing(agent_id="helper"))
