"""The knowledge tools of `episodic mcp` over streamable HTTP, driven by the official MCP
SDK's client: a document added with a key that may write knowledge is found by
search_knowledge (its id, title, uri and the passage's place in it) and gone once deleted; a
read-only key searches but is neither offered nor allowed the writing tools; another tenant
finds nothing; bad arguments are tool errors naming the argument."""

from __future__ import annotations

from typing import Any

from mcp import ClientSession

from episodic.config import Settings
from tests.e2e.test_mcp_http import call, connected, error_of, mcp_http
from tests.server_harness import KEY_A, KEY_A_READER, KEY_B, settings_for

WRITING = {"add_document", "delete_document"}
HANDBOOK = """# Employee handbook

## Leave

Employees get 25 days of paid leave a year. Unused days carry over until March. Leave is
requested in the HR portal at least two weeks ahead; a manager approves it within three
working days.

## Expenses

Travel expenses are reimbursed within 30 days when filed with receipts. Meals on travel days
are covered up to 40 euros a day.
"""
PARKING = "Parking permits come from the facilities desk on the ground floor."


def _settings(sqlite_url: str) -> Settings:
    return settings_for(sqlite_url)  # KEY_A and KEY_B may write knowledge; KEY_A_READER may not


async def _add_handbook(session: ClientSession, agent_id: str = "support") -> dict[str, Any]:
    return await call(
        session,
        "add_document",
        agent_id=agent_id,
        document_id="handbook",
        text=HANDBOOK,
        title="Handbook",
        uri="https://hr.example/handbook",
        metadata={"team": "hr"},
    )


async def _search(session: ClientSession, query: str, **more: Any) -> list[dict[str, Any]]:
    found = await call(session, "search_knowledge", agent_id="support", query=query, **more)
    chunks: list[dict[str, Any]] = found["chunks"]
    return chunks


async def test_an_added_document_is_found_by_its_passages_and_gone_once_deleted(sqlite_url: str) -> None:
    async with mcp_http(_settings(sqlite_url)) as url, connected(url, KEY_A) as writer:
        await writer.initialize()
        listed = {t.name: t for t in (await writer.list_tools()).tools}
        assert WRITING | {"search_knowledge"} <= set(listed)
        assert (
            listed["delete_document"].annotations and listed["delete_document"].annotations.destructive_hint
        )
        await call(writer, "create_agent", agent_id="support")

        made = await _add_handbook(writer)
        assert made["created"] and made["chunk_count"] >= 1 and made["metadata"] == {"team": "hr"}
        await call(
            writer, "add_document", agent_id="support", document_id="parking", text=PARKING, format="text"
        )
        again = await _add_handbook(writer)  # a retry: the same title and text
        conflict = await writer.call_tool(
            "add_document", {"agent_id": "support", "document_id": "handbook", "text": HANDBOOK + "!"}
        )

        hits = await _search(writer, "how many days of paid leave", limit=3)
        best = hits[0]
        only_hr = await _search(writer, "parking permits facilities desk", metadata={"team": "hr"})
        newest = await call(writer, "search_knowledge", agent_id="support", mode="recency")

        gone = await call(writer, "delete_document", agent_id="support", document_id="handbook")
        after = await _search(writer, "how many days of paid leave")
        twice = await writer.call_tool("delete_document", {"agent_id": "support", "document_id": "handbook"})

    assert not again["created"] and error_of(conflict)["code"] == "ALREADY_EXISTS"
    assert (best["document_id"], best["title"], best["uri"]) == (
        "handbook",
        "Handbook",
        "https://hr.example/handbook",
    )
    assert "25 days of paid leave" in best["text"] and isinstance(best["chunk_index"], int)
    assert HANDBOOK[best["start_char"] : best["end_char"]] == best["text"]
    assert best["score"] > 0 and len(hits) <= 3
    assert {c["document_id"] for c in only_hr} <= {"handbook"}
    assert {c["document_id"] for c in newest["chunks"]} == {"handbook", "parking"}
    assert gone == {"agent_id": "support", "document_id": "handbook", "deleted": True}
    assert "handbook" not in {c["document_id"] for c in after}
    assert error_of(twice)["code"] == "NOT_FOUND"


async def test_a_read_only_key_searches_but_is_neither_offered_nor_allowed_to_write(sqlite_url: str) -> None:
    async with mcp_http(_settings(sqlite_url)) as url:
        async with connected(url, KEY_A) as writer:
            await writer.initialize()
            await call(writer, "create_agent", agent_id="support")
            await _add_handbook(writer)
        async with connected(url, KEY_A_READER) as reader:
            await reader.initialize()
            offered = {t.name for t in (await reader.list_tools()).tools}
            found = await _search(reader, "paid leave")
            refused = [
                await reader.call_tool(
                    "add_document", {"agent_id": "support", "document_id": "notes", "text": "Some notes."}
                ),
                await reader.call_tool("delete_document", {"agent_id": "support", "document_id": "handbook"}),
            ]
            still = await _search(reader, "paid leave")
    assert "search_knowledge" in offered and not offered & WRITING
    assert "handbook" in {c["document_id"] for c in found}
    for result in refused:
        error = error_of(result)
        assert (error["code"], error["reason"]) == ("PERMISSION_DENIED", "KNOWLEDGE_READ_ONLY")
        assert "write" in error["message"]
    assert "handbook" in {c["document_id"] for c in still}


async def test_another_tenant_finds_nothing_and_deletes_nothing(sqlite_url: str) -> None:
    async with mcp_http(_settings(sqlite_url)) as url:
        async with connected(url, KEY_A) as a:
            await a.initialize()
            await call(a, "create_agent", agent_id="support")
            await _add_handbook(a)
        async with connected(url, KEY_B) as b:
            await b.initialize()
            unknown_agent = await b.call_tool(
                "search_knowledge", {"agent_id": "support", "query": "paid leave"}
            )
            await call(b, "create_agent", agent_id="support")  # the same id in B's own namespace
            own = await _search(b, "paid leave")
            delete = await b.call_tool("delete_document", {"agent_id": "support", "document_id": "handbook"})
        async with connected(url, KEY_A) as a:
            await a.initialize()
            kept = await _search(a, "paid leave")
    assert error_of(unknown_agent)["code"] == "NOT_FOUND"
    assert own == []
    assert error_of(delete)["code"] == "NOT_FOUND"
    assert "handbook" in {c["document_id"] for c in kept}


BAD_ARGUMENTS: list[tuple[str, dict[str, Any], str]] = [
    ("search_knowledge", {"query": "leave"}, "agent_id"),  # missing
    ("search_knowledge", {"agent_id": "support"}, "query"),  # hybrid needs one
    ("search_knowledge", {"agent_id": "support", "query": "x", "mode": "fuzzy"}, "mode"),
    ("search_knowledge", {"agent_id": "support", "query": "x", "limit": 500}, "limit"),
    ("search_knowledge", {"agent_id": "support", "query": "x", "limit": "3"}, "limit"),  # wrong type
    ("search_knowledge", {"agent_id": "support", "query": "x", "metadata": {"team": 5}}, "metadata.team"),
    ("search_knowledge", {"agent_id": "support", "query": "x", "metadata": {"": "hr"}}, "metadata['']"),
    ("add_document", {"agent_id": "support", "document_id": "d"}, "text"),  # missing
    ("add_document", {"agent_id": "support", "document_id": "d", "text": "   "}, "text"),  # the domain's rule
    ("add_document", {"agent_id": "support", "document_id": "no spaces!", "text": "x"}, "document_id"),
    ("add_document", {"agent_id": "support", "document_id": "d", "text": "x", "format": "pdf"}, "format"),
    ("add_document", {"agent_id": "support", "document_id": "d", "text": "x", "title": "t" * 600}, "title"),
    ("add_document", {"agent_id": "bad agent", "document_id": "d", "text": "x"}, "agent_id"),
    ("delete_document", {"agent_id": "support"}, "document_id"),
    ("delete_document", {"agent_id": "support", "document_id": "d", "documentid": "d"}, "documentid"),
]


async def test_bad_arguments_are_tool_errors_naming_the_argument(sqlite_url: str) -> None:
    async with mcp_http(_settings(sqlite_url)) as url, connected(url, KEY_A) as session:
        await session.initialize()
        await call(session, "create_agent", agent_id="support")
        for tool, arguments, field in BAD_ARGUMENTS:
            error = error_of(await session.call_tool(tool, arguments))
            assert error["code"] == "INVALID_ARGUMENT", (tool, arguments, error)
            named = [f["field"] for f in error["fields"]]
            assert field in named and field in error["message"], (tool, arguments, error)
        still_serving = await session.list_tools()
    assert {"search_knowledge", *WRITING} <= {t.name for t in still_serving.tools}
