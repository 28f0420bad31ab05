"""The inspector's JSON, from a real server with the inspector on: navigation from agents to
one model call, a model call paged, where a phrase went after compaction, the diff of two
calls; keys and tenants (another tenant's ids answer 404, exactly like unknown ones); bad
input answered 400 naming the parameter; the security headers on every response."""

from __future__ import annotations

import pytest

from episodic.inspector.app import CSP, STATIC
from episodic.v1 import episode_pb2, episode_service_pb2, knowledge_service_pb2
from tests.e2e.context_helpers import build, create_agent
from tests.e2e.helpers import Client, user_message
from tests.e2e.inspector_helpers import inspector
from tests.server_harness import KEY_B

PHRASE_MESSAGE = "By the way, my cat is called Zanzibar and she hates thunderstorms."
CHAT = [
    "We are planning the garden for spring: tomatoes along the south fence.",
    "Good idea. Tomatoes want six to eight hours of sun a day.",
    "And basil between them, it keeps the pests away, my neighbour says.",
    "Basil and tomatoes do grow well together; water both at the roots.",
]


def assistant(text: str) -> episode_pb2.MessageInput:
    return episode_pb2.MessageInput(role=episode_pb2.ROLE_ASSISTANT, content=text)


async def chat(client: Client, episode_id: str, turns: int) -> None:
    lines = [CHAT[i % 4] for i in range(turns)]
    await client.add(
        episode_id, *[user_message(t) if i % 2 == 0 else assistant(t) for i, t in enumerate(lines)]
    )


async def test_a_phrase_compacted_away_is_traced_to_the_turn_it_left(database_url: str) -> None:
    async with inspector(database_url) as ins:
        agent_id = await create_agent(ins.grpc, max_working_memory_tokens=600)
        episode_id = await ins.grpc.open_episode(agent_id, user_id="gardener")
        await build(ins.grpc, episode_id, user_message=PHRASE_MESSAGE, append_user_message=True)
        await chat(ins.grpc, episode_id, 300)
        await build(ins.grpc, episode_id, user_message="What should I plant first?", append_user_message=True)

        found = await ins.json(f"/api/episodes/{episode_id}/where", phrase="  ZANZIBAR ")
        assert found["phrase"] == "ZANZIBAR" and not found["truncated"]
        assert [(m["seq"], m["role"]) for m in found["messages"]] == [(1, "user")]
        second = found["calls"][1]
        later = (await ins.json(f"/api/model-calls/{second['model_call_id']}"))["model_call"]
        [summary] = [m["content"] for m in later["messages"] if m["section"] == "summary"]
        if "zanzibar" in summary.casefold():  # the extractive summary kept the sentence
            assert [[f["fate"] for f in c["fates"]] for c in found["calls"]] == [["verbatim"], ["summarized"]]
            assert second["present"] == ["summary"] and found["dropped"] == [] and found["gone"] is None
        else:
            assert [[f["fate"] for f in c["fates"]] for c in found["calls"]] == [["verbatim"], ["lost"]]
            [dropped] = found["dropped"]
            assert (dropped["seq"], dropped["reason"]) == (1, "compaction")
            assert dropped["model_call_id"] == found["gone"]["model_call_id"] == second["model_call_id"]
        assert found["calls"][0]["present"] == ["user_message"]

        assert later["compaction"] == "summarized" and later["summary_span"]["from_seq"] == 1
        assert later["fates"][0] == {
            "from_seq": 1,
            "to_seq": later["summary_span"]["to_seq"],
            "fate": "summarized",
        }
        assert later["fates"][-1]["fate"] == "verbatim" and later["fates"][-1]["to_seq"] == 302
        assert [s["section"] for s in later["sections"]] == [
            "system", "knowledge", "known_facts", "past_conversations", "summary", "history", "user_message",
        ]  # fmt: skip
        diff = await ins.json(f"/api/model-calls/{second['model_call_id']}/diff")
        assert diff["previous_model_call_id"] == found["calls"][0]["model_call_id"]
        assert any(item["section"] == "summary" for item in diff["entered"])
        assert [(i["section"], i["seq"]) for i in diff["left"]] == [("user_message", 1)]


async def test_navigation_reaches_a_model_call_and_pages_what_does_not_fit(database_url: str) -> None:
    async with inspector(database_url) as ins:
        agent_id = await create_agent(
            ins.grpc, max_working_memory_tokens=100_000, context_window_tokens=200_000
        )
        older = await ins.grpc.open_episode(agent_id, user_id="u-1")
        episode_id = await ins.grpc.open_episode(agent_id, user_id="u-1")
        await chat(ins.grpc, episode_id, 70)
        built = await build(ins.grpc, episode_id, user_message="Anything else?")
        call_id = built.report.model_call_id

        assert agent_id in await ins.every_agent()
        users = await ins.json(f"/api/agents/{agent_id}/users")
        assert [(u["user_id"], u["episodes"]) for u in users["users"]] == [("u-1", 2)]
        episodes = await ins.json(f"/api/agents/{agent_id}/users/u-1/episodes")
        assert [e["episode_id"] for e in episodes["episodes"]] == [episode_id, older]  # newest first
        assert (await ins.json(f"/api/episodes/{episode_id}"))["episode"]["message_count"] == 70

        retract = episode_service_pb2.RetractMessageRequest(episode_id=episode_id, seq=70)
        await ins.grpc.episodes.RetractMessage(retract, metadata=ins.grpc.auth)
        newest = await ins.json(f"/api/episodes/{episode_id}/messages")
        assert [m["seq"] for m in newest["messages"]] == list(range(70, 20, -1))
        assert [bool(m["retract_time"]) for m in newest["messages"][:2]] == [True, False]
        earlier = await ins.json(f"/api/episodes/{episode_id}/messages", page_token=newest["next_page_token"])
        assert [m["seq"] for m in earlier["messages"]] == list(range(20, 0, -1)) and not earlier[
            "next_page_token"
        ]

        calls = await ins.json(f"/api/episodes/{episode_id}/model-calls")
        assert [c["model_call_id"] for c in calls["model_calls"]] == [call_id]
        first = (await ins.json(f"/api/model-calls/{call_id}"))["model_call"]
        assert first["message_count"] == 72 and len(first["messages"]) == 50 and first["next_offset"] == 50
        rest = (await ins.json(f"/api/model-calls/{call_id}", offset="50"))["model_call"]
        assert [m["index"] for m in rest["messages"]] == list(range(50, 72)) and rest["next_offset"] is None
        assert first["fates"] == [{"from_seq": 1, "to_seq": 70, "fate": "verbatim"}]


async def test_keys_and_tenants_are_those_of_grpc(database_url: str) -> None:
    async with inspector(database_url) as ins:
        agent_id = await create_agent(ins.grpc)
        episode_id = await ins.grpc.open_episode(agent_id, user_id="private-user")
        call_id = (await build(ins.grpc, episode_id, user_message="hello")).report.model_call_id

        for key in (None, "epk_not_a_key"):
            refused = await ins.get("/api/agents", key)
            assert refused.status_code == 401 and refused.json()["error"]["code"] == "UNAUTHENTICATED"
        assert (await ins.json("/api/session", KEY_B))["tenant_id"] == "tenant-b"
        assert agent_id not in await ins.every_agent(KEY_B)
        assert (await ins.json(f"/api/agents/{agent_id}/users", KEY_B))["users"] == []
        for path in (
            f"/api/episodes/{episode_id}",
            f"/api/episodes/{episode_id}/messages",
            f"/api/episodes/{episode_id}/model-calls",
            f"/api/model-calls/{call_id}",
            f"/api/model-calls/{call_id}/diff",
        ):
            answer = await ins.get(path, KEY_B)
            assert answer.status_code == 404 and answer.json()["error"]["code"] == "NOT_FOUND", path
        where = await ins.get(f"/api/episodes/{episode_id}/where", KEY_B, query={"phrase": "hello"})
        assert where.status_code == 404
        assert "private-user" not in where.text and "hello" not in where.text.replace('"phrase"', "")


@pytest.mark.parametrize(
    ("path", "params", "field"),
    [
        ("/api/episodes/{episode}/where", {"phrase": "x" * 2_000}, "phrase"),  # the URL under 8 KiB
        ("/api/episodes/{episode}/where", {"phrase": "   "}, "phrase"),
        ("/api/model-calls/{call}", {"offset": "-1"}, "offset"),
        ("/api/episodes/{episode}/messages", {"page_token": "not-ours"}, "page_token"),
        ("/api/agents/{agent}/users", {"page_token": "not-ours"}, "page_token"),
    ],
)
async def test_bad_input_is_400_naming_the_parameter(
    sqlite_url: str, path: str, params: dict[str, str], field: str
) -> None:
    async with inspector(sqlite_url) as ins:
        agent_id = await create_agent(ins.grpc)
        episode_id = await ins.grpc.open_episode(agent_id)
        call_id = (await build(ins.grpc, episode_id, user_message="hello")).report.model_call_id
        answer = await ins.get(path.format(episode=episode_id, call=call_id, agent=agent_id), query=params)
        assert answer.status_code == 400, answer.text
        error = answer.json()["error"]
        assert error["code"] == "INVALID_ARGUMENT"
        assert [v["field"] for v in error["field_violations"]] == [field]


async def test_every_answer_carries_the_content_security_policy(sqlite_url: str) -> None:
    async with inspector(sqlite_url) as ins:
        page = await ins.get("/", None)
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assert "<script" in page.text and "https://" not in page.text  # nothing from elsewhere
        for answer in (
            page,
            await ins.get("/static/inspector.js", None),
            await ins.get("/static/..%2Fapp.py", None),
            await ins.get("/api/agents", None),
            await ins.get("/api/nothing-here"),
        ):
            assert answer.headers["content-security-policy"] == CSP
            assert answer.headers["x-content-type-options"] == "nosniff"
        for module in sorted(STATIC.glob("*.js")):  # the entry point and every module it imports
            script = await ins.get(f"/static/{module.name}", None)
            assert script.status_code == 200 and script.headers["content-type"].startswith("text/javascript")
            assert script.text == module.read_text()
            again = await ins.get(
                f"/static/{module.name}", None, headers={"If-None-Match": script.headers["etag"]}
            )
            assert again.status_code == 304 and not again.text  # revalidated, not sent again
        assert (await ins.get("/static/..%2Fapp.py", None)).status_code == 404
        assert (await ins.get("/api/agents", method="POST")).status_code == 405


async def test_a_rendered_chunk_links_to_its_document_in_the_agents_tenant_only(database_url: str) -> None:
    async with inspector(database_url) as ins:
        agent_id = await create_agent(ins.grpc)
        text = "# Garden rules\n\nWater the tomatoes at the roots every morning before nine."
        doc = knowledge_service_pb2.DocumentInput(document_id="rules", text=text, title="Garden rules")
        create = knowledge_service_pb2.CreateDocumentsRequest(agent_id=agent_id, documents=[doc])
        await ins.grpc.knowledge.CreateDocuments(create, metadata=ins.grpc.auth)
        episode_id = await ins.grpc.open_episode(agent_id)
        built = await build(ins.grpc, episode_id, user_message="When do I water the tomatoes?")
        call = (await ins.json(f"/api/model-calls/{built.report.model_call_id}"))["model_call"]
        (item,) = call["knowledge"]
        assert (item["origin"], item["fate"], item["document_id"]) == ("stored", "whole", "rules")
        assert "knowledge" in [s["section"] for s in call["sections"]]
        found = (await ins.json(item["document_href"]))["document"]
        assert found["text"] == text and found["title"] == "Garden rules"
        chunk = found["chunks"][item["chunk_index"]]
        assert text[chunk["start_char"] : chunk["end_char"]].startswith("# Garden rules")
        assert (await ins.get(item["document_href"], key=KEY_B)).status_code == 404
