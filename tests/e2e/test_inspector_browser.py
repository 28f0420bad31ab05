"""The context inspector in a real browser: a real `episodic serve` with the inspector on,
a conversation seeded through the Python client whose early detail ("my cat is called
Zanzibar") is compacted away, and Debian's Chromium driven by tests/browser/inspect.mjs
(Playwright) like a user: key prompt (a wrong key first), agent → user → episode, a model
call, "Where did it go?", the diff, a reload, "Why recalled?" for a call that asked about a
past episode, an over-long phrase, another tenant's episode, the re-compaction case of
issue 28 (a 250-token budget, 13 turns, "Zanzibar" lost from the summary by a re-compaction),
and a call that recalled the cat's message into "[Earlier in this conversation]".
The script reports what the page showed; the assertions are here.

Needs /usr/bin/chromium, node and `npm ci` in tests/browser: skipped without them, failed
without them when EPISODIC_REQUIRE_BROWSER=1 (CI). Screenshots go to build/inspector/;
docs/inspector-why-recalled.png, docs/inspector-recompaction.png and docs/inspector-earlier.png
are copies of three of them."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from episodic.edges.keys import config_line
from episodic_client import EpisodicClient, MemoryConfig, message_input, tool_call, tool_result
from episodic_client.v1 import context_pb2, episode_pb2
from tests.e2e.helpers import DIGEST_SETTLE_SECONDS, clean_environment
from tests.server_harness import KEY_A, KEY_B, TENANT_A, TENANT_B

ROOT = Path(__file__).resolve().parents[2]
BROWSER_DIR = ROOT / "tests" / "browser"
PLAYWRIGHT = BROWSER_DIR / "node_modules" / "playwright-core"
CHROMIUM = Path("/usr/bin/chromium")
SCREENSHOTS = ROOT / "build" / "inspector"
START_TIMEOUT = 30.0
DRIVER_TIMEOUT = 120.0
# a digest's settled states, in the client's enum: a call waiting for one ends on them
SETTLED_DIGESTS = frozenset({episode_pb2.DIGEST_STATE_READY, episode_pb2.DIGEST_STATE_FAILED})

TRACE_TEMPLATE = "http://tracing.example.invalid/trace/{trace_id}"
AGENT_ID = "garden-bot"
USER_ID = "mary"
PHRASE = "my cat is called Zanzibar"
HOSTILE = '<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">'
SECRET_OF_B = "tenant B keeps this to itself"
SECTIONS = [
    "system", "knowledge", "known_facts", "past_conversations", "summary", "earlier", "history",
    "user_message",
]  # fmt: skip
BUDGET = 300
WINDOW = 1000  # ceiling: 70 % of it
FILLER = [
    "Could you help me plan the garden beds for spring? I want tomatoes, basil and some peppers.",
    "Tomatoes want full sun and about sixty centimetres between plants; basil does well beside them.",
    "What about watering? The summer here is hot and dry, with a hose ban most years.",
    "Mulch deeply, water at the roots early in the morning, and collect rain in a barrel.",
    "And the peppers, do they need anything special compared with the tomatoes?",
    "Peppers like the same sun but warmer soil; wait two weeks longer before planting them out.",
]
# "Why recalled?": a turn asking about the past episode ("Last spring my roses got black spot;
# I sprayed them with neem oil."). "sprayed" is not "spray": the word no recalled episode holds.
RECALL_QUESTION = "Which oil did I spray on my roses last spring, against the black spot?"
RECALLED_WORDS = ["oil", "roses", "last", "spring", "black", "spot"]
# Issue 28's reporter: an agent with a 250-token budget, 13 turns, "Zanzibar" in the first. The
# summary now keeps the user's named things through re-compactions, so the case follows the
# assistant's advice in its reply ("book early", seq 2): the first compaction's summary says it;
# the re-compaction at the next turn leaves it out.
RECAP_AGENT_ID = "trip-bot"
RECAP_USER_ID = "zoe"
RECAP_BUDGET = 250
RECAP_PHRASE = "book early"
RECAP_SEQ = 2
RECAP_TURNS = [
    (
        "Hi! We are planning a trip to Zanzibar in March, somewhere warm and quiet.",
        "Zanzibar in March is hot and the long rains start soon after; book early.",
    ),
    (
        "We fly from Lyon on 3 March and come back on 17 March.",
        "Fourteen nights: enough for Stone Town and a beach week.",
    ),
    (
        "Our budget is 4200 euros for two people, flights included.",
        "That is workable; flights from Lyon run about 900 euros each.",
    ),
    (
        "My wife Clara is vegetarian and I am allergic to peanuts.",
        "I will flag both for restaurants and the airline.",
    ),
    (
        "We would like a hotel with a pool in Stone Town for 4 nights.",
        "Emerson Spice and Tembo House both have pools.",
    ),
    (
        "Then 10 nights on the east coast, in Paje or Jambiani.",
        "Paje is livelier, Jambiani calmer; both have kite schools.",
    ),
    ("Clara wants to try kitesurfing, 3 lessons of 2 hours.", "Lessons run about 60 euros an hour in Paje."),
    (
        "I want to visit the spice farm and Prison Island on day 2.",
        "Both fit in one day with an early start.",
    ),
    (
        "Can we see the Jozani forest red colobus monkeys too?",
        "Yes, a half-day tour from Paje, about 35 euros each.",
    ),
    (
        "What vaccines do we need before 3 March?",
        "Hepatitis A and typhoid are advised; yellow fever only from endemic countries.",
    ),
    (
        "Should we take cash? Which currency?",
        "US dollars printed after 2013 and some Tanzanian shillings for markets.",
    ),
    (
        "Remind me of the luggage limit with the Lyon flight, 23 kg?",
        "23 kg in the hold and 8 kg in the cabin per person.",
    ),
    ("Summing up: what have we planned so far?", "Here is the plan so far."),
]
# "[Earlier in this conversation]": an agent with a 250-token budget (and the default share for
# passages recalled from earlier); its user names the cat, talks of a trip for thirty turns, then
# asks about the cat: the call recalls the first message from earlier.
EARLIER_AGENT_ID = "lisbon-bot"
EARLIER_USER_ID = "yann"
EARLIER_PHRASE = "Zanzibar"
EARLIER_TURNS = [
    ("We fly to Lisbon on Friday morning and stay for ten days.", "Lovely, Lisbon in spring is mild."),
    ("I booked a small hotel in Alfama near the castle.", "Alfama is hilly; pack comfortable shoes."),
    ("Should we take the tram up to the viewpoints?", "Tram 28 goes there, but it gets crowded."),
    ("We also want a day trip to Sintra by train.", "Trains leave Rossio station every twenty minutes."),
    ("What about food, any dishes we must try?", "Try bacalhau, grilled sardines and pasteis de nata."),
]
EARLIER_QUESTION = "Who will look after my cat while I'm away?"
# Chromium logs every non-2xx fetch; these are the answers the steps provoke on purpose.
EXPECTED_CONSOLE = (
    "Failed to load resource: the server responded with a status of 401",
    "Failed to load resource: the server responded with a status of 400",
    "Failed to load resource: the server responded with a status of 404",
)


# --- the browser, or a reason why not -------------------------------------------------------


@pytest.fixture
def node() -> str:
    """The node binary, once Chromium and Playwright are known to be there (else skip)."""
    node = shutil.which("node")
    lacking = [
        what
        for what, there in (
            (str(CHROMIUM), CHROMIUM.exists()),
            ("node", node is not None),
            ("tests/browser/node_modules/playwright-core (npm ci in tests/browser)", PLAYWRIGHT.is_dir()),
        )
        if not there
    ]
    if lacking or node is None:
        reason = "the inspector's browser test needs " + ", ".join(lacking)
        if os.environ.get("EPISODIC_REQUIRE_BROWSER") == "1":
            pytest.fail(reason + " (EPISODIC_REQUIRE_BROWSER=1)")
        pytest.skip(reason)
    return node


# --- a real server with the inspector on ----------------------------------------------------


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Server:
    proc: subprocess.Popen[bytes]
    inspector_url: str
    lines: list[str] = field(default_factory=list)
    grpc_port: int = 0
    ready: threading.Event = field(default_factory=threading.Event)

    def read(self) -> None:
        """Drains stderr (a full pipe would block the server's logging); notes the port."""
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            line = raw.decode(errors="replace").rstrip("\n")
            self.lines.append(line)
            if not self.ready.is_set() and line.startswith("{"):
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue
                if isinstance(entry, dict) and entry.get("message") == "serving":
                    self.grpc_port = int(entry["port"])
                    self.ready.set()
        self.ready.set()  # exited: wake the waiter

    def tail(self, n: int = 30) -> str:
        return "\n".join(self.lines[-n:])


@pytest.fixture
def server(node: str, tmp_path: Path) -> Iterator[Server]:
    """`episodic serve` with the inspector on a free port; gRPC on the port it logs."""
    del node  # only its order matters: no server is started when the browser is missing
    port = free_port()
    keys = ",".join([config_line(TENANT_A, KEY_A), config_line(TENANT_B, KEY_B)])
    argv = [
        sys.executable, "-m", "episodic", "serve",
        "--database-url", f"sqlite:///{tmp_path / 'inspector.db'}", "--migrate-on-start",
        "--address", "127.0.0.1:0", "--inspector-address", f"127.0.0.1:{port}",
        "--inspector-trace-url", TRACE_TEMPLATE, "--embedder", "hashing",
        "--shutdown-grace-seconds", "2",
    ]  # fmt: skip
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**clean_environment(), "EPISODIC_API_KEYS": keys},
        cwd=tmp_path,
    )
    running = Server(proc, f"http://127.0.0.1:{port}")
    reader = threading.Thread(target=running.read, daemon=True)
    reader.start()
    try:
        if not running.ready.wait(START_TIMEOUT) or not running.grpc_port:
            raise AssertionError(f"no 'serving' line within {START_TIMEOUT} s:\n{running.tail()}")
        yield running
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        reader.join(5)
        if proc.stderr is not None:
            proc.stderr.close()


def get_json(url: str, key: str) -> tuple[int, Any]:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {key}"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status), json.loads(response.read())
    except urllib.error.HTTPError as error:
        with error:
            return int(error.code), json.loads(error.read())


# --- the conversation -----------------------------------------------------------------------


@dataclass(frozen=True)
class Seeded:
    episode_id: str
    other_tenant_episode_id: str
    calls: list[str]  # model call ids, oldest first
    recall_call: str = ""  # the call that asked about the past episode
    recap_episode_id: str = ""  # the re-compaction case
    recap_calls: list[str] = field(default_factory=list)
    earlier_episode_id: str = ""  # the cat recalled from earlier in the conversation
    earlier_calls: list[str] = field(default_factory=list)


def weather(call_id: str, city: str, forecast: str, high: int) -> list[episode_pb2.MessageInput]:
    return [
        message_input("assistant", "", tool_calls=[tool_call(call_id, "get_weather", {"city": city})]),
        message_input(
            "tool",
            "",
            tool_result=tool_result(
                call_id, {"forecast": forecast, "high_c": high}, duration=timedelta(milliseconds=87)
            ),
        ),
    ]


def close_digested(client: EpisodicClient, episode_id: str) -> None:
    """Closes the episode and returns once its digest is READY, waiting on the state (polled)."""
    client.close_episode(episode_id)
    deadline = time.monotonic() + DIGEST_SETTLE_SECONDS
    while (digest := client.get_episode(episode_id).episode.digest).state not in SETTLED_DIGESTS:
        assert time.monotonic() < deadline, f"the digest did not settle: {digest}"
        time.sleep(0.05)
    assert digest.state == episode_pb2.DIGEST_STATE_READY, digest


def seed(address: str) -> Seeded:
    """A past episode (recalled later), then an episode whose budget of 300 tokens makes
    the history get summarized after a few turns; two tool results (the older one stubbed),
    a message of markup, and a last call with a bigger budget that renders over 50 messages.
    Tenant B gets an episode of its own."""
    calls: list[str] = []
    with EpisodicClient(address, api_key=KEY_A) as client:
        config = MemoryConfig(
            max_working_memory_tokens=BUDGET, context_window_tokens=WINDOW, tool_results_kept_verbatim=1
        )
        client.create_agent(
            AGENT_ID,
            system_prompt="You are a helpful gardening assistant.",
            model="gpt-4",
            memory_config=config,
        )
        past = client.open_episode(AGENT_ID, USER_ID).episode.episode_id
        client.add_message(past, "user", "Last spring my roses got black spot; I sprayed them with neem oil.")
        client.add_message(past, "assistant", "Neem oil helps; also clear the fallen leaves.")
        close_digested(client, past)
        episode_id = client.open_episode(AGENT_ID, USER_ID).episode.episode_id

        def turn(
            user: str,
            reply: str = "",
            then: list[episode_pb2.MessageInput] | None = None,
            config: MemoryConfig | None = None,
        ) -> None:
            built = client.build_context(
                episode_id, user_message=user, append_user_message=True, memory_config=config
            )
            calls.append(built.report.model_call_id)
            if then:
                client.add_messages(episode_id, then)
            if reply:
                seq = client.add_message(episode_id, "assistant", reply).message.seq
                client.record_model_reply(
                    built.report.model_call_id,
                    input_tokens=built.report.total_tokens,
                    output_tokens=20,
                    latency=timedelta(milliseconds=640),
                    assistant_message_seq=seq,
                )

        turn(f"Hi! By the way, {PHRASE} and she sleeps in the greenhouse.", "Zanzibar is a lovely name.")
        both = [*weather("call_paris", "Paris", "light rain", 14), *weather("call_lyon", "Lyon", "sunny", 19)]
        turn("What will the weather be in Paris and in Lyon tomorrow?", "Rain in Paris, sun in Lyon.", both)
        turn("Anything else?", "Nothing else for now.")
        turn(HOSTILE, "That looks like markup; I will treat it as plain text.")
        for question, answer in zip(FILLER[::2], FILLER[1::2], strict=True):
            turn(question, answer)
        turn(RECALL_QUESTION, "Neem oil, last spring; and clear the fallen leaves.")
        recall_call = calls[-1]
        notes = [message_input("user" if k % 2 == 0 else "assistant", f"note {k}: ok") for k in range(60)]
        client.add_messages(episode_id, notes)
        roomy = MemoryConfig(max_working_memory_tokens=6000, context_window_tokens=16000)
        turn("Summing up: what did we decide?", config=roomy)
        recap_episode_id, recap_calls = seed_recompaction(client)
        earlier_episode_id, earlier_calls = seed_earlier(client)
    with EpisodicClient(address, api_key=KEY_B) as client:
        client.create_agent("other-bot", model="gpt-4")
        other = client.open_episode("other-bot", "bob").episode.episode_id
        client.add_message(other, "user", SECRET_OF_B)
    return Seeded(
        episode_id,
        other,
        calls,
        recall_call,
        recap_episode_id,
        recap_calls,
        earlier_episode_id,
        earlier_calls,
    )


def seed_recompaction(client: EpisodicClient) -> tuple[str, list[str]]:
    """Issue 28's case, with the default (extractive) summarizer: a summary keeps a bounded
    number of sentences, so a re-compaction keeps the later, denser ones."""
    client.create_agent(
        RECAP_AGENT_ID,
        system_prompt="You are a helpful travel assistant.",
        model="gpt-4",
        # the summary's case, as it was: no known facts (this episode's own facts among them) and
        # no passages recalled from earlier to take the summary's room
        memory_config=MemoryConfig(
            max_working_memory_tokens=RECAP_BUDGET,
            context_window_tokens=WINDOW,
            known_facts=False,
            earlier_budget_percent=0,
        ),
    )
    episode_id = client.open_episode(RECAP_AGENT_ID, RECAP_USER_ID).episode.episode_id
    calls = []
    for user, reply in RECAP_TURNS:
        built = client.build_context(episode_id, user_message=user, append_user_message=True)
        calls.append(built.report.model_call_id)
        client.add_message(episode_id, "assistant", reply)
    return episode_id, calls


def seed_earlier(client: EpisodicClient) -> tuple[str, list[str]]:
    """A 250-token budget: the cat named, thirty turns about a trip, then a question about the
    cat, whose call recalls the cat's message from earlier."""
    client.create_agent(
        EARLIER_AGENT_ID,
        system_prompt="You are a helpful travel assistant.",
        model="gpt-4",
        memory_config=MemoryConfig(max_working_memory_tokens=RECAP_BUDGET, context_window_tokens=WINDOW),
    )
    episode_id = client.open_episode(EARLIER_AGENT_ID, EARLIER_USER_ID).episode.episode_id
    calls = []
    for user, reply in [("My cat is called Zanzibar.", "What a grand name for a cat!")] + EARLIER_TURNS * 6:
        built = client.build_context(episode_id, user_message=user, append_user_message=True)
        calls.append(built.report.model_call_id)
        client.add_message(episode_id, "assistant", reply)
    asked = client.build_context(episode_id, user_message=EARLIER_QUESTION, append_user_message=True)
    calls.append(asked.report.model_call_id)
    return episode_id, calls


def run_driver(node: str, server: Server, seeded: Seeded) -> dict[str, Any]:
    if SCREENSHOTS.exists():
        shutil.rmtree(SCREENSHOTS)
    SCREENSHOTS.mkdir(parents=True)
    env = {
        **os.environ,
        "INSPECTOR_URL": server.inspector_url,
        "INSPECTOR_KEY": KEY_A,
        "AGENT_ID": AGENT_ID,
        "USER_ID": USER_ID,
        "EPISODE_ID": seeded.episode_id,
        "PHRASE": PHRASE,
        "OTHER_TENANT_EPISODE_ID": seeded.other_tenant_episode_id,
        "WHY_CALL_ID": seeded.recall_call,
        "WHY_NOT_PHRASE": "neem oil",
        "RECAP_EPISODE_ID": seeded.recap_episode_id,
        "RECAP_PHRASE": RECAP_PHRASE,
        "EARLIER_EPISODE_ID": seeded.earlier_episode_id,
        "EARLIER_CALL_ID": seeded.earlier_calls[-1] if seeded.earlier_calls else "",
        "EARLIER_PHRASE": EARLIER_PHRASE,
        "SCREENSHOT_DIR": str(SCREENSHOTS),
    }
    done = subprocess.run(
        [node, "inspect.mjs"],
        cwd=BROWSER_DIR,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=DRIVER_TIMEOUT,
        check=False,
    )
    stdout = done.stdout.decode(errors="replace").strip()
    seen: dict[str, Any] = json.loads(stdout.splitlines()[-1]) if stdout else {}
    assert done.returncode == 0, (
        f"the browser driver failed ({done.returncode}): {seen.get('driver_error')}\n"
        f"steps: {seen.get('steps')}\nstderr: {done.stderr.decode(errors='replace')[-2000:]}\n"
        f"server:\n{server.tail()}"
    )
    return seen


# --- the test -------------------------------------------------------------------------------


def test_the_inspector_shows_where_a_detail_went_in_a_real_browser(node: str, server: Server) -> None:
    seeded = seed(f"127.0.0.1:{server.grpc_port}")
    with EpisodicClient(f"127.0.0.1:{server.grpc_port}", api_key=KEY_A) as client:
        log = list(client.iter_messages(seeded.episode_id))
        every = [*seeded.calls, *seeded.recap_calls, *seeded.earlier_calls]
        calls = {c: client.get_model_call(c).model_call for c in every}
    status, answer = get_json(f"{server.inspector_url}/api/session", KEY_A)
    assert (status, answer["tenant_id"]) == (200, TENANT_A)

    seen = run_driver(node, server, seeded)

    assert_key_handling(seen)
    assert_navigation(seen, seeded)
    assert_the_log(seen, len(log))
    assert_the_newest_call(seen, calls[seeded.calls[-1]])
    assert_where_it_went(seen, seeded, phrase_truth(seeded.calls, calls))
    assert_why_recalled(seen, calls[seeded.recall_call])
    assert_the_recompaction_case(seen, phrase_truth(seeded.recap_calls, calls, RECAP_PHRASE, RECAP_SEQ))
    assert_recalled_from_earlier(
        seen, calls[seeded.earlier_calls[-1]], phrase_truth(seeded.earlier_calls, calls)
    )
    assert_the_diff(seen, seeded, phrase_truth(seeded.calls, calls))
    assert_the_layout(seen)
    assert_bad_input(seen)
    assert_a_clean_console(seen)
    assert all(Path(p).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in seen["screenshots"])
    assert len(seen["screenshots"]) >= 6


def assert_key_handling(seen: dict[str, Any]) -> None:
    assert seen["root_status"] == 200
    assert "script-src 'self'" in seen["csp_header"] and "default-src 'none'" in seen["csp_header"]
    assert seen["asked_for_key"], "a server with keys and no key stored: the page asks for one"
    wrong = seen["wrong_key"]
    assert wrong["asked_again"] and "refused" in wrong["error"] and wrong["stored"] == 0, wrong
    assert TENANT_A in seen["tenant"]
    assert seen["urls_with_key"] == [], "a key went into a URL"
    # only the first session probe (is this a dev server?) goes out without a key
    assert {u.split("?")[0] for u in seen["api_requests_without_auth"]} <= {
        seen["url_after_key"].split("#")[0].rstrip("/") + "/api/session"
    }
    assert not seen["asked_for_key_after_reload"], "the key is kept for the browser session"
    assert seen["forget_visible"] and seen["after_forget"] == {"asked": True, "stored": 0}


def assert_navigation(seen: dict[str, Any], seeded: Seeded) -> None:
    agents = [AGENT_ID, RECAP_AGENT_ID, EARLIER_AGENT_ID]
    assert sorted(seen["agents"]) == sorted(agents), "tenant B's agent must not be listed"
    assert seen["users"] == [USER_ID]
    assert len(seen["episodes"]) == 2 and seen["episodes"][0] == seeded.episode_id, "newest first"
    assert seen["episode_url"].endswith(f"#/episodes/{seeded.episode_id}")
    assert seeded.episode_id in seen["episode_header"] and "open" in seen["episode_header"]


def assert_the_log(seen: dict[str, Any], count: int) -> None:
    assert seen["log_first_page"] == 50 and seen["earlier_clicks"] >= 1, "the log is paged backwards"
    assert [m["seq"] for m in seen["log"]] == list(range(1, count + 1)), "oldest at the top, all loaded"
    assert PHRASE in seen["log"][0]["content"]
    hostile = [m for m in seen["log"] if m["content"] == HOSTILE]
    assert len(hostile) == 1, "markup in a message is shown as its literal text"
    assert seen["pwned"] == "undefined"
    assert seen["app_img_count"] == 0 and seen["app_script_count"] == 0
    assert seen["tool_calls"] == 2 and seen["tool_call_open"]
    for shown in ("get_weather", "Paris", "light rain", "87 ms"):
        assert shown in seen["tool_call_text"]
    assert len(seen["tool_results"]) == 2


def assert_the_newest_call(seen: dict[str, Any], call: Any) -> None:
    shown = seen["latest_call"]
    report = call.report
    assert call.model_call_id in shown["title"]
    bars = shown["section_bars"]
    assert [b["section"] for b in bars] == SECTIONS
    track = max(report.budget_tokens, report.total_tokens)  # the budget, not the far larger ceiling
    assert report.ceiling_tokens > track
    for bar in bars:  # widths against the budget, its marker at the end of the track
        assert percent(bar["fill_width"]) == pytest.approx(100 * bar["tokens"] / track, abs=0.01), bar
        assert percent(bar["marker_left"]) == pytest.approx(100 * report.budget_tokens / track, abs=0.01)
    assert len({b["fill_color"] for b in bars}) == len(SECTIONS), "each section its own colour"
    history = next(b for b in bars if b["section"] == "history")
    assert history["tokens"] > 0 and history["fill_px"] > 0
    assert sum(b["tokens"] for b in bars) + report.section_tokens.reply_priming == report.total_tokens

    assert len(call.messages) > 50 and str(len(call.messages)) in shown["message_count"]
    assert len(shown["rendered_messages"]) == 50 and shown["more_messages_visible"]
    assert shown["after_more"] == len(call.messages), "'more messages' fetched the next page"
    for index, (item, message) in enumerate(zip(shown["rendered_messages"], call.messages, strict=False)):
        assert item["index"] == index and item["content"] == message.content, item
        assert item["section_label"] and item["fate"], item
    summary = [m for m in shown["rendered_messages"] if m["section"] == "summary"]
    assert len(summary) == 1 and summary[0]["fate"].startswith("summary of 1–"), summary
    assert shown["fates"].startswith("seq 1–") and "summarized (summary span 1–" in shown["fates"]
    if report.trace_id:
        assert shown["trace"] == report.trace_id
        assert shown["trace_href"] == TRACE_TEMPLATE.format(trace_id=report.trace_id)


def percent(css: str) -> float:
    assert css.endswith("%"), css
    return float(css[:-1])


@dataclass(frozen=True)
class PhraseTruth:
    """What the stored calls say of the phrase, computed here apart from the inspector."""

    fates: list[str]  # the message's fate in each call
    gone_at: str | None  # the first call rendering the phrase nowhere after one that did
    reason: str  # why, when gone_at
    dropped_at: str | None = None  # the first call after the message was seen where it no longer was
    drop_reason: str = ""
    returned_at: str | None = None  # the first call after that where it was seen again


SEEN = ("verbatim", "earlier", "summarized")  # the message's phrase reached the model
REASONS = {  # in rendering order: the first one the phrase was last seen in says why it went
    context_pb2.CONTEXT_SECTION_KNOWLEDGE: "knowledge",
    context_pb2.CONTEXT_SECTION_KNOWN_FACTS: "known_facts",
    context_pb2.CONTEXT_SECTION_PAST_CONVERSATIONS: "recall",
    context_pb2.CONTEXT_SECTION_EARLIER: "earlier",
}


def section_text(call: Any, section: int) -> str:
    return "".join(m.content for m in call.messages if m.section == section).casefold()


def seq_truth(call: Any, seq: int, phrase: str) -> str:
    """Log message `seq`, which says `phrase` (casefolded), in the call: verbatim, recalled
    from earlier in this conversation (a rendered passage holds it and the section says the
    phrase), in the summary, lost, pruned, or not yet written."""
    report = call.report
    if seq > max(report.user_message_seq, report.history_to_seq, report.summary_to_seq):
        return "not_yet"
    if report.user_message_seq == seq or any(
        m.section == context_pb2.CONTEXT_SECTION_HISTORY and m.seq == seq for m in call.messages
    ):
        return "verbatim"
    recalled = any(
        seq in p.seqs and p.fate != context_pb2.PASSAGE_FATE_DROPPED for p in report.earlier_passages
    )
    summarized = report.summary_from_seq <= seq <= report.summary_to_seq
    if recalled and phrase in section_text(call, context_pb2.CONTEXT_SECTION_EARLIER):
        return "earlier"
    if summarized and phrase in section_text(call, context_pb2.CONTEXT_SECTION_SUMMARY):
        return "summarized"
    if recalled or summarized:
        return "earlier_cut" if recalled else "lost"
    return "pruned"


def drop_reason(before: str, fate: str) -> str:
    if before == "earlier":
        return "earlier"
    if fate in ("lost", "earlier_cut"):
        return "recompaction" if before == "summarized" else "compaction"
    return "window"


def phrase_truth(
    call_ids: list[str], calls: dict[str, Any], phrase: str = "zanzibar", seq: int = 1
) -> PhraseTruth:
    """The trace of log message `seq` (the only one saying `phrase`, casefolded)."""
    fates = [seq_truth(calls[c], seq, phrase) for c in call_ids]
    dropped_at = returned_at = None
    reason = ""
    before = ""
    for call_id, fate in zip(call_ids, fates, strict=True):
        if dropped_at is None and before and fate not in SEEN:
            dropped_at, reason = call_id, drop_reason(before, fate)
        elif dropped_at is None and fate in SEEN:
            before = fate
        elif dropped_at is not None and fate in SEEN:
            returned_at = call_id
            break
    present = [{m.section for m in calls[c].messages if phrase in m.content.casefold()} for c in call_ids]
    for i in range(1, len(present)):
        if present[i - 1] and not present[i]:
            why = reason if call_ids[i] == dropped_at else ""
            why = why or next((r for s, r in REASONS.items() if s in present[i - 1]), "context")
            return PhraseTruth(fates, call_ids[i], why, dropped_at, reason, returned_at)
    return PhraseTruth(fates, None, "", dropped_at, reason, returned_at)


def assert_where_it_went(seen: dict[str, Any], seeded: Seeded, truth: PhraseTruth) -> None:
    """The page follows the phrase into the summaries and the passages recalled from earlier
    in this conversation: a message inside the summary's span is there only while the summary
    says it (issue 28: it once blamed the first compaction), and back when a passage recalled
    into "[Earlier in this conversation]" says it."""
    fullest = max(seen["drop_call"]["section_bars"], key=lambda b: b["tokens"])
    assert fullest["fill_px"] > 40, "a 300-token budget's bars are scaled to it, not to the ceiling"
    where = seen["where"]
    assert PHRASE in where["summary"]
    assert [m["seq"] for m in where["messages"]] == [1] and PHRASE in where["messages"][0]["text"]
    assert where["cells"] == truth.fates
    assert len(where["presence"]) == len(seeded.calls) and where["presence"][0] == "user_message"
    assert [d["reason"] for d in where["dropped"]] == ([truth.drop_reason] if truth.dropped_at else [])
    assert [r["model_call_id"] for r in where["returned"]] == (
        [truth.returned_at] if truth.returned_at else []
    )
    assert all(r["text"].startswith("Came back at model call") for r in where["returned"]), where["returned"]
    if truth.gone_at is None:
        assert where["gone"] == [], where
        assert "renders it in" in where["verdict"][0]
        # the driver opened the call it dropped out at, else the one it left the history at
        opened = truth.dropped_at or seeded.calls[truth.fates.index("summarized")]
        assert seen["drop_call_url"].endswith(f"/calls/{opened}")
        return
    [gone] = where["gone"]
    assert gone["reason"] == truth.reason and "stopped seeing it" in gone["text"], gone
    assert seen["drop_call_url"].endswith(f"/calls/{truth.gone_at}"), "the verdict links to its model call"
    at_drop = seen["drop_call"]
    assert not [m for m in at_drop["rendered_messages"] if "zanzibar" in m["content"].casefold()]


def assert_why_recalled(seen: dict[str, Any], call: Any) -> None:
    """For the call that asked about the past episode, the page shows the query's words that
    episode's rendered entry holds, highlighted in it, and the passage that matched them; the
    word it lacks ("spray": it said "sprayed") is named; "why not?" finds a phrase in it."""
    why = seen["why"]
    [recalled] = [e for e in call.report.recalled_episodes if e.rendered]
    assert why["url"].endswith(f"/calls/{call.model_call_id}")
    assert RECALL_QUESTION in why["query"]
    [shown] = [e for e in why["episodes"] if e["episode_id"] == recalled.episode_id]
    assert shown["matched"] == RECALLED_WORDS, shown
    assert shown["rendered"] == "true" and shown["basis"] == "passages"
    assert {h.casefold() for h in shown["hits"]} == set(RECALLED_WORDS), (
        "each word highlighted where it stands"
    )
    assert shown["passages"] and all("neem oil" in p.casefold() for p in shown["passages"]), shown["passages"]
    assert why["unmatched"] == ["spray", "against"]
    verdict = why["why_not"]
    assert verdict["verdict"] == "rendered" and recalled.episode_id in verdict["text"], verdict
    assert "oil" in verdict["text"]


def assert_the_recompaction_case(seen: dict[str, Any], truth: PhraseTruth) -> None:
    """Issue 28's done-when: "where did it go?" names the re-compaction that dropped the
    phrase from the summary, not the first compaction whose summary still said it."""
    assert truth.reason == "recompaction", truth
    first_summarized = truth.fates.index("summarized")
    assert truth.fates.index("lost") > first_summarized, truth.fates
    recap = seen["recompaction"]
    assert recap["cells"] == truth.fates
    [gone] = recap["gone"]
    assert gone["reason"] == "recompaction" and "stopped seeing it" in gone["text"], gone
    assert gone["model_call_id"] == truth.gone_at
    assert recap["dropped"] and recap["dropped"][0]["reason"] == "recompaction"


def assert_recalled_from_earlier(seen: dict[str, Any], call: Any, truth: PhraseTruth) -> None:
    """The call that recalled the cat's message into "[Earlier in this conversation]" shows the
    section (its bar, its message and the passages with their log seqs and fates); the log's
    badge for seq 1 says "recalled from earlier in this conversation", and so does "where did it
    go?" at that call, in the same words once the phrase is traced."""
    earlier = seen["earlier"]
    shown = earlier["call"]
    bar = next(b for b in shown["section_bars"] if b["section"] == "earlier")
    assert bar["tokens"] == call.report.section_tokens.earlier > 0 and bar["fill_px"] > 0
    [message] = [m for m in shown["rendered_messages"] if m["section"] == "earlier"]
    assert message["section_label"] == "earlier in this conversation"
    assert message["fate"].startswith("recalled from earlier: ") and EARLIER_PHRASE in message["content"]
    expected = [(list(p.seqs), context_pb2.PassageFate.Name(p.fate)) for p in call.report.earlier_passages]
    assert [(p["seqs"], f"PASSAGE_FATE_{p['fate'].upper()}") for p in earlier["passages"]] == expected
    [passage] = [p for p in earlier["passages"] if 1 in p["seqs"] and p["fate"] != "dropped"]
    fate = {"whole": "earlier", "cut": "earlier_cut"}[passage["fate"]]
    assert earlier["badge"]["fate"] == fate and not earlier["badge"]["phrase_fate"], earlier["badge"]
    trace = earlier["trace"]
    assert trace["cells"] == truth.fates and truth.fates[-1] == "earlier", (trace["cells"], truth)
    assert "earlier" in trace["presence"][-1].split()
    traced = earlier["traced_badge"]
    assert (
        traced["phrase_fate"] == "earlier" and traced["text"] == "recalled from earlier in this conversation"
    )
    if truth.returned_at:  # the summary had let go of it: the trace says when it came back
        [returned] = trace["returned"]
        assert returned["fate"] == "earlier" and returned["model_call_id"] == truth.returned_at
        assert "recalled from earlier in this conversation" in returned["text"]


def assert_the_layout(seen: dict[str, Any]) -> None:
    """Nothing overflows its panel and the selected model call is in view in its list, at a
    desktop's and a small laptop's size (issue 28, defect 3: a chip wrapped out of the facts
    row, and the list did not scroll to the selected call, hiding its badges)."""
    assert set(seen["layout"]) == {"1400x900", "1024x768"}
    for size, layout in seen["layout"].items():
        assert layout["overflowing"] == [], size
        assert layout["selected_visible"], size


def assert_the_diff(seen: dict[str, Any], seeded: Seeded, truth: PhraseTruth) -> None:
    """The diff of the call where seq 1 left the verbatim history: it left, a summary entered."""
    left_at = next(i for i, fate in enumerate(truth.fates) if fate not in ("verbatim", "not_yet"))
    assert seen["diff_call_url"].endswith(f"/calls/{seeded.calls[left_at]}")
    diff = seen["diff"]
    assert seen["diff_url"].endswith("/diff")
    assert diff["summary"].startswith("Compared with the previous call")
    left = [item for item in diff["left"] if item["seq"] == 1]
    assert len(left) == 1 and PHRASE in left[0]["text"], diff["left"]
    assert [item for item in diff["entered"] if item["section"] == "summary"], diff["entered"]
    assert seen["diff_after_reload"] == diff, "a reload shows the same view"


def assert_bad_input(seen: dict[str, Any]) -> None:
    long = seen["long_phrase"]
    assert long["status"] == "400" and any(f.startswith("phrase:") for f in long["fields"]), long
    other = seen["other_tenant"]
    assert other["status"] == "404" and "not found" in other["error"].lower(), other
    assert other["log_messages"] == 0
    assert SECRET_OF_B not in json.dumps(seen)


def assert_a_clean_console(seen: dict[str, Any]) -> None:
    assert seen["csp_violations"] == []
    assert seen["page_errors"] == []
    unexpected = [m for m in seen["console"] if not m["text"].startswith(EXPECTED_CONSOLE)]
    assert unexpected == []
    assert seen["failed_requests"] == []
