"""The inspector's JSON, from a real server with the inspector on: navigation from agents to
one model call, a model call paged, where a phrase went after compaction (and how it came
back through "[Earlier in this conversation]"), the diff of two calls; keys and tenants
(another tenant's ids answer 404, exactly like unknown ones); bad input answered 400 naming
the parameter; the security headers on every response."""

from __future__ import annotations

from typing import Any

import pytest

from episodic.edges.inspector.app import CSP, STATIC
from episodic.v1 import episode_pb2, episode_service_pb2, knowledge_service_pb2
from tests.e2e.context_helpers import TRIP, build, create_agent
from tests.e2e.helpers import Client, user_message
from tests.e2e.inspector_helpers import Inspector, inspector
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
        earlier = "".join(m["content"] for m in later["messages"] if m["section"] == "earlier")
        recalled = {seq for p in later["earlier_passages"] if p["fate"] != "dropped" for seq in p["seqs"]}
        if 1 in recalled and "zanzibar" in earlier.casefold():  # recalled from earlier in the conversation
            assert [[f["fate"] for f in c["fates"]] for c in found["calls"]] == [["verbatim"], ["earlier"]]
            assert "earlier" in second["present"] and found["dropped"] == [] and found["gone"] is None
        elif "zanzibar" in summary.casefold():  # the extractive summary kept the sentence
            assert [[f["fate"] for f in c["fates"]] for c in found["calls"]] == [["verbatim"], ["summarized"]]
            assert second["present"] == ["summary"] and found["dropped"] == [] and found["gone"] is None
        else:
            assert [[f["fate"] for f in c["fates"]] for c in found["calls"]] == [["verbatim"], ["lost"]]
            [dropped] = found["dropped"]
            assert (dropped["seq"], dropped["reason"]) == (1, "compaction")
            assert dropped["model_call_id"] == found["gone"]["model_call_id"] == second["model_call_id"]
        assert found["calls"][0]["present"] == ["user_message"]

        assert later["compaction"] == "summarized" and later["summary_span"]["from_seq"] == 1
        span_end = later["summary_span"]["to_seq"]
        in_span = [run for run in later["fates"] if run["to_seq"] <= span_end]
        assert in_span[0]["from_seq"] == 1 and in_span[-1]["to_seq"] == span_end
        for run in in_span:  # summarized, but for the passages recalled from earlier
            seqs = set(range(run["from_seq"], run["to_seq"] + 1))
            assert (
                run["fate"] in ("earlier", "earlier_cut") if seqs <= recalled else run["fate"] == "summarized"
            )
        assert later["fates"][-1]["fate"] == "verbatim" and later["fates"][-1]["to_seq"] == 302
        assert [s["section"] for s in later["sections"]] == [
            "system", "knowledge", "known_facts", "past_conversations", "summary", "earlier", "history",
            "user_message",
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


def phrase_truth(call: dict[str, Any], seq: int, folded: str) -> str:
    """What the model saw of a phrase said in log message `seq`, read here from the call's
    JSON apart from the inspector's rule: verbatim, recalled from earlier (a rendered passage
    holds the message, and the section says the phrase), in the summary, or neither (or not
    yet written)."""
    spans = [call["summary_span"], call["history_span"]]
    if seq > max([call["user_message_seq"], *(span["to_seq"] for span in spans if span)]):
        return "not_yet"
    said = {m["section"]: m["content"].casefold() for m in call["messages"]}
    if any(m["seq"] == seq for m in call["messages"]):
        return "verbatim"
    passage = [p["fate"] for p in call["earlier_passages"] if seq in p["seqs"] and p["fate"] != "dropped"]
    span = call["summary_span"]
    covered = span is not None and span["from_seq"] <= seq <= span["to_seq"]
    if passage and folded in said.get("earlier", ""):
        return "earlier"
    if covered and folded in said.get("summary", ""):
        return "summarized"
    if passage:
        return "earlier_cut"
    return "lost" if covered else "pruned"


def run_fate(call: dict[str, Any], seq: int) -> str:
    """The log's badge for `seq` in the call: its run."""
    return str(next(r["fate"] for r in call["fates"] if r["from_seq"] <= seq <= r["to_seq"]))


async def traced_against_the_calls(ins: Inspector, episode_id: str, phrase: str, seq: int) -> dict[str, Any]:
    """The trace ("where did it go?") of a phrase only log message `seq` says, checked call by call
    against what each stored call rendered (`phrase_truth`) and against the log's badge for
    the message in that call (its fates): the same verdict, but for "summarized", which the
    badge says of a message inside the summary's span whether or not the summary says the
    phrase. Returns the answer, with each call's JSON under "views"."""
    found = await ins.json(f"/api/episodes/{episode_id}/where", phrase=phrase)
    assert [m["seq"] for m in found["messages"]] == [seq] and not found["truncated"]
    views = [(await ins.json(f"/api/model-calls/{c['model_call_id']}"))["model_call"] for c in found["calls"]]
    traced = [c["fates"][0]["fate"] for c in found["calls"]]
    assert traced == [phrase_truth(call, seq, phrase.casefold()) for call in views]
    for row, call, fate in zip(found["calls"], views, traced, strict=True):
        badge = run_fate(call, seq) if call["fates"] and call["fates"][-1]["to_seq"] >= seq else "not_yet"
        if fate == "earlier":  # recalled: the badge says so, and the section holds the phrase
            assert badge in ("earlier", "earlier_cut") and "earlier" in row["present"]
        elif fate in ("summarized", "lost"):  # the badge never claims the summary says it
            assert badge == "summarized"
        else:
            assert badge == fate
    if found["dropped"]:  # it came back at the first call after its drop that showed it again
        [dropped] = found["dropped"]
        at = [c["model_call_id"] for c in found["calls"]].index(dropped["model_call_id"])
        again = [i for i in range(at, len(traced)) if traced[i] in ("verbatim", "earlier", "summarized")]
        assert [(r["seq"], r["model_call_id"], r["fate"]) for r in found["returned"]] == [
            (seq, found["calls"][i]["model_call_id"], traced[i]) for i in again[:1]
        ]
    else:
        assert found["returned"] == []
    return {**found, "views": views, "traced": traced}


async def test_a_phrase_left_through_the_summary_comes_back_through_the_earlier_section(
    database_url: str,
) -> None:
    """The cat named, thirty turns about a trip, then a question about the cat: the call
    recalls messages 1-2 into "[Earlier in this conversation]", and the trace says so at that
    call ("earlier": recalled from earlier in this conversation) for both. The assistant's
    "What a grand name for a cat!" left the history into a summary that does not say it
    ("lost": summarized, not in the summary; dropped, `compaction`), and came back through the
    section ("returned", `earlier`). The call lists each passage's seqs and fate, and its fates
    (the log's badges) say the same of the messages; at every call the trace agrees with what
    the stored call rendered, and with the badge."""
    async with inspector(database_url) as ins:
        agent_id = await create_agent(ins.grpc, max_working_memory_tokens=250)
        episode_id = await ins.grpc.open_episode(agent_id, user_id="traveller")

        async def turn(said: str, answer: str = "") -> str:
            built = await build(ins.grpc, episode_id, user_message=said, append_user_message=True)
            if answer:
                await ins.grpc.add(episode_id, assistant(answer))
            return built.report.model_call_id

        await turn("My cat is called Zanzibar.", "What a grand name for a cat!")
        for i in range(30):
            await turn(*TRIP[i % len(TRIP)])
        asked = await turn("Who will look after my cat while I'm away?")

        named = await traced_against_the_calls(ins, episode_id, "Zanzibar", 1)
        praised = await traced_against_the_calls(ins, episode_id, "grand name", 2)
        for found in (named, praised):
            assert found["calls"][-1]["model_call_id"] == asked
            traced = found["traced"]
            left = next(i for i, fate in enumerate(traced) if fate not in ("verbatim", "not_yet"))
            assert traced[left] in ("summarized", "lost"), traced  # it left the history into the summary
            assert traced[-1] == "earlier" and "earlier" in found["calls"][-1]["present"]

        # the reply left through the summary, then came back through the earlier section
        traced = praised["traced"]
        lost = traced.index("lost")
        assert set(traced[:lost]) <= {"not_yet", "verbatim"}
        [dropped] = praised["dropped"]
        assert (dropped["seq"], dropped["reason"]) == (2, "compaction")
        assert dropped["model_call_id"] == praised["calls"][lost]["model_call_id"]
        [returned] = praised["returned"]
        back = traced.index("earlier")
        assert back > lost and returned["model_call_id"] == praised["calls"][back]["model_call_id"]
        assert returned["fate"] == "earlier"

        last = named["views"][-1]
        [passage] = [p for p in last["earlier_passages"] if 1 in p["seqs"] and p["fate"] != "dropped"]
        assert 2 in passage["seqs"]
        for seq in (1, 2):
            assert run_fate(last, seq) == {"whole": "earlier", "cut": "earlier_cut"}[passage["fate"]]
        [section] = [m for m in last["messages"] if m["section"] == "earlier"]
        assert section["content"].startswith("[Earlier in this conversation]")
        assert "Zanzibar" in section["content"] and "grand name" in section["content"]
        assert next(s["tokens"] for s in last["sections"] if s["section"] == "earlier") == section["tokens"]
