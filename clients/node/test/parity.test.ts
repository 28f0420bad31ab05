/**
 * The RPCs beyond the main flow, against a live server: agent updates, episode listing and
 * erasure, live watching with drafts, model replies, memories, session data, memory tools
 * and diagnostics.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";

import {
  AbortedError,
  CheckIndexStatus,
  Episode_State,
  EpisodicClient,
  MemoryKind,
  MemoryState,
  NotFoundError,
  Role,
  type WatchEpisodeResponse,
} from "../src/index.js";
import { rejectionOf, uniqueId } from "./helpers.js";
import { type RunningServer, startServer } from "./server.js";

describe("EpisodicClient beyond the main flow, against a live server", () => {
  let server: RunningServer;
  let client: EpisodicClient;
  let agentId: string;

  before(async () => {
    server = await startServer();
    client = new EpisodicClient(server.address, { apiKey: server.apiKey });
    agentId = uniqueId("agent");
    await client.createAgent(agentId, { systemPrompt: "Be brief.", model: "gpt-4o" });
  });

  after(async () => {
    client?.close();
    await server?.stop();
  });

  async function openEpisode(userId: string): Promise<string> {
    return (await client.openEpisode(agentId, userId)).episode!.episodeId;
  }

  it("updates an agent: the masked field only, or the fields given without a mask", async () => {
    const id = uniqueId("agent");
    await client.createAgent(id, { systemPrompt: "Old.", displayName: "Keeper", model: "gpt-4o" });
    const masked = await client.updateAgent(id, {
      systemPrompt: "New.",
      displayName: "Ignored",
      updateMask: ["system_prompt"],
    });
    assert.equal(masked.agent?.systemPrompt, "New.");
    assert.equal(masked.agent?.displayName, "Keeper");
    const unmasked = await client.updateAgent(id, { displayName: "Lighthouse keeper" });
    assert.equal(unmasked.agent?.displayName, "Lighthouse keeper");
    assert.equal((await client.getAgent(id)).agent?.systemPrompt, "New.");
  });

  it("lists episodes filtered by agent, user and state, page by page", async () => {
    const userId = uniqueId("user");
    const first = await openEpisode(userId);
    const second = (await client.openEpisode(agentId, userId, { episodeId: uniqueId("ep") })).episode!.episodeId;
    await client.closeEpisode(first);

    const all = await client.listEpisodes({ agentId, userId });
    assert.deepEqual(new Set(all.episodes.map((e) => e.episodeId)), new Set([first, second]));
    const open = await client.listEpisodes({ agentId, userId, state: "open" });
    assert.deepEqual(
      open.episodes.map((e) => e.episodeId),
      [second],
    );
    const closed = await client.listEpisodes({ userId, state: Episode_State.STATE_CLOSED });
    assert.deepEqual(
      closed.episodes.map((e) => e.episodeId),
      [first],
    );

    const page = await client.listEpisodes({ agentId, userId, pageSize: 1 });
    assert.equal(page.episodes.length, 1);
    assert.notEqual(page.nextPageToken, "");
    const rest = await client.listEpisodes({ agentId, userId, pageSize: 1, pageToken: page.nextPageToken });
    assert.equal(rest.episodes.length, 1);
    assert.notEqual(rest.episodes[0].episodeId, page.episodes[0].episodeId);
  });

  it("erases a user: episodes, messages, memories and session data are gone afterwards", async () => {
    const userId = uniqueId("user");
    const other = uniqueId("user");
    const episodeId = await openEpisode(userId);
    const kept = await openEpisode(other);
    await client.addMessage(episodeId, "user", "My locker code is 4711.");
    await client.updateSessionData(episodeId, { locker: "4711" });
    await client.createMemories(agentId, userId, [{ text: "Has locker 4711.", kind: MemoryKind.MEMORY_KIND_FACT }]);

    const { receipt } = await client.eraseUser(userId, { agentId });
    assert.equal(receipt?.episodes, 1);
    assert.equal(receipt?.messages, 1);
    assert.equal(receipt?.memories, 1);
    assert.equal(receipt?.sessionData, 1);
    assert.match(receipt?.userHash ?? "", /^[0-9a-f]{64}$/);

    assert.ok((await rejectionOf(client.getEpisode(episodeId))) instanceof NotFoundError);
    assert.deepEqual((await client.listEpisodes({ userId })).episodes, []);
    assert.deepEqual((await client.listMemories(agentId, userId)).memories, []);
    assert.equal((await client.getEpisode(kept)).episode?.userId, other); // other users untouched

    const again = await client.eraseUser(userId); // idempotent, every agent
    assert.equal(again.receipt?.episodes, 0);
  });

  it("watches an episode: appended messages, a draft pushed and finalized, then the close", async () => {
    const episodeId = await openEpisode(uniqueId("user"));
    const first = await client.addMessage(episodeId, "user", "Tell me about the lamp.");
    const events: WatchEpisodeResponse[] = [];
    // after_seq: everything after the first message, replayed if it lands before the watch starts.
    const watching = (async () => {
      for await (const event of client.watchEpisode(episodeId, { afterSeq: first.message!.seq })) {
        if (!event.heartbeat) events.push(event);
      }
    })();

    const appended = await client.addMessage(episodeId, "user", "Is it blue?");
    assert.equal((await client.pushAssistantDelta(episodeId, "draft-1", 0, "It is ")).length, 6);
    assert.equal((await client.pushAssistantDelta(episodeId, "draft-1", 6, "blue.")).length, 11);
    const final = await client.finalizeAssistantMessage(episodeId, "draft-1", {
      length: 11,
      metadata: { via: "watch" },
    });
    assert.equal(final.message?.content, "It is blue.");
    assert.equal(final.message?.role, Role.ROLE_ASSISTANT);
    assert.equal(final.message?.clientMessageId, "draft-1");
    await client.closeEpisode(episodeId);
    await watching; // ends OK after the close

    const messages = events.flatMap((e) => (e.messageAppended ? [e.messageAppended] : []));
    assert.deepEqual(
      messages.map((m) => m.seq),
      [appended.message!.seq, final.message!.seq],
    );
    assert.equal(messages[0].content, "Is it blue?");
    const drafted = events.flatMap((e) => (e.draftText ? [e.draftText] : []));
    assert.equal(drafted.map((d) => d.text).join(""), "It is blue.");
    const finalized = events.flatMap((e) => (e.draftFinalized ? [e.draftFinalized] : []));
    assert.deepEqual(finalized, [{ draftId: "draft-1", seq: final.message!.seq }]);
    assert.equal(events.at(-1)?.episodeClosed?.episodeId, episodeId);
  });

  it("leaves a watch early without an error, and maps a missing episode to NotFoundError", async () => {
    const episodeId = await openEpisode(uniqueId("user"));
    await client.addMessage(episodeId, "user", "one");
    await client.addMessage(episodeId, "user", "two");
    for await (const event of client.watchEpisode(episodeId, { afterSeq: 0 })) {
      assert.equal(event.messageAppended?.content, "one");
      break;
    }
    const missing = client.watchEpisode("ep_missing", { deadlineMs: 5_000 });
    assert.ok((await rejectionOf(missing.next())) instanceof NotFoundError);
  });

  it("records a model reply and lists the episode's model calls", async () => {
    const episodeId = await openEpisode(uniqueId("user"));
    const built = await client.renderContext(episodeId, { userMessage: "Hello?", appendUserMessage: true });
    const modelCallId = built.report.modelCallId;
    const answer = await client.addMessage(episodeId, "assistant", "Hello.");
    const recorded = await client.recordModelReply(modelCallId, {
      inputTokens: 120,
      outputTokens: 7,
      latencyMs: 1_250,
      assistantMessageSeq: answer.message!.seq,
    });
    const reply = recorded.modelCall?.reply;
    assert.equal(reply?.inputTokens, 120);
    assert.equal(reply?.outputTokens, 7);
    assert.deepEqual(reply?.latency, { seconds: 1, nanos: 250_000_000 });
    assert.equal(reply?.assistantMessageSeq, answer.message!.seq);

    await client.renderContext(episodeId, { userMessage: "Again?" });
    const listed = await client.listModelCalls(episodeId);
    assert.equal(listed.modelCalls.length, 2);
    assert.equal(listed.modelCalls[1].modelCallId, modelCallId); // newest first
    assert.equal(listed.modelCalls[1].reply?.outputTokens, 7);
    const page = await client.listModelCalls(episodeId, { pageSize: 1 });
    assert.equal(page.modelCalls.length, 1);
    assert.notEqual(page.nextPageToken, "");
    assert.equal((await client.getModelCall(modelCallId)).modelCall?.reply?.inputTokens, 120);
  });

  it("gets, lists, updates and deletes memories", async () => {
    const userId = uniqueId("user");
    const created = await client.createMemories(agentId, userId, [
      { memoryId: uniqueId("mem"), text: "Prefers window seats.", kind: MemoryKind.MEMORY_KIND_PREFERENCE },
      { text: "Lives in Oslo.", kind: MemoryKind.MEMORY_KIND_FACT, topics: ["home"] },
    ]);
    const [seats, home] = created.results.map((r) => r.memory!);
    assert.equal((await client.getMemory(seats.memoryId)).memory?.text, "Prefers window seats.");

    const listed = await client.listMemories(agentId, userId);
    assert.deepEqual(new Set(listed.memories.map((m) => m.memoryId)), new Set([seats.memoryId, home.memoryId]));
    const page = await client.listMemories(agentId, userId, { pageSize: 1, state: "promoted" });
    assert.equal(page.memories.length, 1);
    assert.notEqual(page.nextPageToken, "");

    const updated = await client.updateMemory(home.memoryId, { text: "Lives in Bergen.", topics: ["home", "city"] });
    assert.equal(updated.memory?.text, "Lives in Bergen.");
    assert.deepEqual(updated.memory?.topics, ["home", "city"]);
    assert.equal(updated.memory?.kind, MemoryKind.MEMORY_KIND_FACT); // not in the mask: unchanged
    const eventTime = new Date("2030-01-01T00:00:00Z");
    const kind = await client.updateMemory(home.memoryId, { kind: "event", eventTime });
    assert.equal(kind.memory?.kind, MemoryKind.MEMORY_KIND_EVENT);
    assert.equal(kind.memory?.eventTime?.toISOString(), "2030-01-01T00:00:00.000Z");

    const deleted = await client.deleteMemory(seats.memoryId);
    assert.equal(deleted.memory?.memoryId, seats.memoryId);
    assert.ok((await rejectionOf(client.getMemory(seats.memoryId))) instanceof NotFoundError);
    assert.ok((await rejectionOf(client.deleteMemory(seats.memoryId))) instanceof NotFoundError);
    assert.deepEqual(
      (await client.listMemories(agentId, userId)).memories.map((m) => m.memoryId),
      [home.memoryId],
    );
  });

  it("lists superseded and pending memories only when asked", async () => {
    const userId = uniqueId("user");
    const episodeId = await openEpisode(userId);
    const pending = await client.createMemories(
      agentId,
      userId,
      [{ text: "Is learning Norwegian.", kind: MemoryKind.MEMORY_KIND_FACT }],
      { episodeId },
    );
    const pendingId = pending.results[0].memory!.memoryId;
    const listed = await client.listMemories(agentId, userId, { state: "pending", episodeId });
    assert.deepEqual(
      listed.memories.map((m) => [m.memoryId, m.state]),
      [[pendingId, MemoryState.MEMORY_STATE_PENDING]],
    );
    const promoted = await client.listMemories(agentId, userId, { state: MemoryState.MEMORY_STATE_PROMOTED });
    assert.deepEqual(promoted.memories, []);

    // A memory superseded by a newer one shows only with includeSuperseded.
    const older = await client.createMemories(agentId, userId, [
      { text: "I live in Paris.", kind: MemoryKind.MEMORY_KIND_FACT },
    ]);
    const olderId = older.results[0].memory!.memoryId;
    const newer = await client.createMemories(agentId, userId, [
      { text: "I live in Berlin.", kind: MemoryKind.MEMORY_KIND_FACT },
    ]);
    assert.deepEqual(newer.results[0].superseded, [olderId]);
    const visible = await client.listMemories(agentId, userId, { state: "promoted" });
    assert.deepEqual(
      visible.memories.map((m) => m.memoryId),
      [newer.results[0].memory!.memoryId],
    );
    const all = await client.listMemories(agentId, userId, { state: "promoted", includeSuperseded: true });
    assert.ok(all.memories.some((m) => m.memoryId === olderId && m.supersededBy === newer.results[0].memory!.memoryId));
  });

  it("reads and merges session data, with etags and a ttl", async () => {
    const episodeId = await openEpisode(uniqueId("user"));
    const empty = await client.getSessionData(episodeId);
    assert.equal(empty.sessionData?.etag, "");

    const first = await client.updateSessionData(episodeId, { cart: ["tea"], step: 1 });
    assert.deepEqual(first.sessionData?.data, { cart: ["tea"], step: 1 });
    const merged = await client.updateSessionData(
      episodeId,
      { step: null, city: "Oslo" },
      { etag: first.sessionData!.etag, ttlMs: 60_000 },
    );
    assert.deepEqual(merged.sessionData?.data, { cart: ["tea"], city: "Oslo" });
    assert.ok(merged.sessionData?.expireTime && merged.sessionData.expireTime.getTime() > Date.now());
    assert.deepEqual((await client.getSessionData(episodeId)).sessionData?.data, { cart: ["tea"], city: "Oslo" });

    const etag = first.sessionData!.etag; // no longer the stored one
    const stale = await rejectionOf(client.updateSessionData(episodeId, { step: 2 }, { etag }));
    assert.ok(stale instanceof AbortedError, String(stale));
  });

  it("hands out the memory tools and runs a call of them", async () => {
    const { tools } = await client.getMemoryTools();
    assert.deepEqual(tools.map((t) => t.name).sort(), ["add_memory", "search_memory"]);
    const add = tools.find((t) => t.name === "add_memory")!;
    assert.equal((add.definition as { type?: string }).type, "function");

    const userId = uniqueId("user");
    const episodeId = await openEpisode(userId);
    const added = JSON.parse(
      (await client.callMemoryTool(episodeId, "add_memory", { text: "Owns a red kayak.", kind: "fact" })).result,
    ) as { memory_id: string };
    assert.equal((await client.getMemory(added.memory_id)).memory?.state, MemoryState.MEMORY_STATE_PENDING);
    const found = JSON.parse(
      (await client.callMemoryTool(episodeId, "search_memory", '{"query": "kayak"}')).result,
    ) as { memories: { text: string }[] };
    assert.deepEqual(
      found.memories.map((m) => m.text),
      ["Owns a red kayak."],
    );
  });

  it("searches memories by creation time (after / before)", async () => {
    const userId = uniqueId("user");
    await client.createMemories(agentId, userId, [{ text: "Plays the cello.", kind: MemoryKind.MEMORY_KIND_FACT }]);
    const past = new Date(Date.now() - 3_600_000);
    const future = new Date(Date.now() + 3_600_000);
    const since = await client.searchMemories(agentId, userId, "", { mode: "recency", after: past, kinds: ["fact"] });
    assert.equal(since.hits.length, 1);
    const later = await client.searchMemories(agentId, userId, "", { mode: "recency", after: future });
    assert.equal(later.hits.length, 0);
    const earlier = await client.searchMemories(agentId, userId, "", { mode: "recency", before: past });
    assert.equal(earlier.hits.length, 0);
  });

  it("echoes a payload and checks the vector index", async () => {
    assert.equal((await client.echo("ping")).payload.toString("utf8"), "ping");
    assert.deepEqual([...(await client.echo(new Uint8Array([0, 1, 255]))).payload], [0, 1, 255]);

    const userId = uniqueId("user");
    const episodeId = await openEpisode(userId);
    await client.addMessage(episodeId, "user", "The lamp is blue.");
    await client.closeEpisode(episodeId, { waitForDigest: true, deadlineMs: 30_000 });
    const checked = await client.checkIndex({ agentId });
    assert.equal(checked.status, CheckIndexStatus.CHECK_INDEX_STATUS_CONSISTENT);
    assert.equal(checked.missing, 0);
    assert.equal(checked.orphaned, 0);
    assert.ok(checked.sqlVectors >= 1 && checked.sqlVectors === checked.indexVectors);
    assert.equal((await client.checkIndex()).status, CheckIndexStatus.CHECK_INDEX_STATUS_CONSISTENT);
  });
});
