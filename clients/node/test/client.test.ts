import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";

import {
  type BuildContextResponse,
  ClientClosedError,
  ContextSection,
  EpisodicClient,
  EpisodicError,
  GrpcStatus,
  InvalidArgumentError,
  MemoryKind,
  NotFoundError,
  Role,
  UnauthenticatedError,
  UnavailableError,
} from "../src/index.js";
import { rejectionOf, uniqueId } from "./helpers.js";
import { type RunningServer, startServer } from "./server.js";

describe("EpisodicClient against a live server", () => {
  let server: RunningServer;
  let client: EpisodicClient;

  before(async () => {
    server = await startServer();
    client = new EpisodicClient(server.address, { apiKey: server.apiKey });
  });

  after(async () => {
    client?.close();
    await server?.stop();
  });

  it("runs the main flow: agent, episode, messages, streamed context, search", async () => {
    const agentId = uniqueId("agent");
    const { agent } = await client.createAgent(agentId, { systemPrompt: "Be brief.", model: "gpt-4o" });
    assert.equal(agent?.agentId, agentId);
    assert.equal((await client.getAgent(agentId)).agent?.systemPrompt, "Be brief.");

    const opened = await client.openEpisode(agentId, "user-42", { metadata: { channel: "node-test" } });
    const episodeId = opened.episode!.episodeId;
    assert.equal(opened.created, true);
    assert.deepEqual(opened.episode?.metadata, { channel: "node-test" });

    const first = await client.addMessage(episodeId, "user", "Which lighthouse keeps the blue lamp?");
    assert.equal(first.message?.role, Role.ROLE_USER);
    const batch = await client.addMessages(episodeId, [
      { role: "assistant", content: "The lighthouse at Cape Wrath keeps the blue lamp." },
      { role: Role.ROLE_USER, content: "Thanks." },
    ]);
    assert.deepEqual(
      batch.messages.map((m) => m.seq),
      [first.message!.seq + 1, first.message!.seq + 2],
    );

    const frames: BuildContextResponse[] = [];
    for await (const frame of client.buildContext(episodeId, { userMessage: "Where is the blue lamp kept?" })) {
      frames.push(frame);
    }
    assert.ok(frames.length >= 1);
    const report = frames.at(-1)!.report;
    assert.ok(report && report.totalTokens > 0 && report.modelCallId !== "");
    const rendered = frames.flatMap((f) => f.messages);
    const userMessage = rendered.find((m) => m.section === ContextSection.CONTEXT_SECTION_USER_MESSAGE);
    assert.equal(userMessage?.content, "Where is the blue lamp kept?");

    const built = await client.renderContext(episodeId, { userMessage: "And the red one?" });
    assert.match(built.text, /^system: Be brief\./);
    assert.match(built.text, /user: And the red one\?$/);
    assert.ok(built.text.includes("Cape Wrath"));

    const closed = await client.closeEpisode(episodeId, { note: "done", waitForDigest: true, deadlineMs: 30_000 });
    assert.equal(closed.episode?.messageCount, 3);
    const found = await client.searchEpisodes(agentId, "user-42", "blue lamp lighthouse");
    assert.deepEqual(
      found.snippets.map((s) => s.episodeId),
      [episodeId],
    );
  });

  it("retracts a message, exports the user, erases and imports them back", async () => {
    const agentId = uniqueId("agent");
    await client.createAgent(agentId, { systemPrompt: "Be brief.", model: "gpt-4o" });
    const userId = uniqueId("user");
    const episodeId = (await client.openEpisode(agentId, userId)).episode!.episodeId;
    await client.addMessages(episodeId, [
      { role: "user", content: "My locker code is 4411." },
      { role: "user", content: "Which tram goes to Belém?" },
    ]);
    const { message } = await client.retractMessage(episodeId, 1);
    assert.ok(message?.retractTime, "the retracted message keeps its place in the log");
    const memory = { memoryId: uniqueId("m"), text: "Likes trams.", kind: MemoryKind.MEMORY_KIND_FACT };
    await client.createMemories(agentId, userId, [{ ...memory, metadata: { source: "node" } }], {
      keepSeparate: true,
    });

    const responses = [];
    for await (const response of client.exportUser(userId)) responses.push(response);
    const manifest = responses.at(-1)?.manifest;
    assert.deepEqual(
      manifest?.parts.map((p) => p.name),
      ["episodes/000001.jsonl", "memories.jsonl"],
    );
    await client.eraseUser(userId);
    const parts = responses.slice(0, -1).map((r) => ({ part: r.part, records: r.records }));
    const imported = await client.importUser([{ manifest }, ...parts]);
    assert.equal(imported.episodesImported, 1);
    assert.equal(imported.memoriesImported, 1);
    const log = await client.listMessages(episodeId);
    assert.deepEqual(
      log.messages.map((m) => [m.seq, Boolean(m.retractTime)]),
      [
        [2, false],
        [1, true],
      ],
    );
    assert.deepEqual((await client.getMemory(memory.memoryId)).memory?.metadata, { source: "node" });
  });

  it("finds a memory it created", async () => {
    const agentId = uniqueId("agent");
    await client.createAgent(agentId);
    const created = await client.createMemories(agentId, "user-7", [
      { text: "Prefers window seats on long flights.", kind: MemoryKind.MEMORY_KIND_PREFERENCE },
    ]);
    const memoryId = created.results[0]?.memory?.memoryId;
    assert.ok(memoryId);
    const { hits } = await client.searchMemories(agentId, "user-7", "window seat flights");
    assert.equal(hits[0]?.memory?.memoryId, memoryId);
  });

  it("decodes a bad request into InvalidArgumentError naming the field", async () => {
    const error = await rejectionOf(client.createAgent("not a valid id!"));
    assert.ok(error instanceof InvalidArgumentError, String(error));
    assert.equal(error.code, GrpcStatus.INVALID_ARGUMENT);
    assert.equal(error.domain, "episodic.v1");
    assert.notEqual(error.reason, "");
    assert.deepEqual(
      error.fieldViolations.map((v) => v.field),
      ["agent.agent_id"],
    );
    assert.match(error.fieldViolations[0]!.description, /characters/);
    assert.equal(error.metadata?.get("grpc-status-details-bin").length, 1);
  });

  it("decodes an unknown episode into NotFoundError with its reason and resource", async () => {
    const missing = uniqueId("episode");
    const error = await rejectionOf(client.getEpisode(missing));
    assert.ok(error instanceof NotFoundError, String(error));
    assert.equal(error.codeName, "NOT_FOUND");
    assert.match(error.reason, /NOT_FOUND/);
    assert.equal(error.resourceName, missing);
  });

  it("raises a stream's error from the for-await loop", async () => {
    const frames = client.buildContext(uniqueId("episode"), { userMessage: "hello" });
    const error = await rejectionOf(
      (async () => {
        for await (const _frame of frames) {
          assert.fail("a missing episode streams no frame");
        }
      })(),
    );
    assert.ok(error instanceof NotFoundError, String(error));
  });

  it("stops the stream when the loop is left early", async () => {
    const agentId = uniqueId("agent");
    await client.createAgent(agentId, { systemPrompt: "Be brief." });
    const { episode } = await client.openEpisode(agentId, "user-1");
    for await (const frame of client.buildContext(episode!.episodeId, { userMessage: "hi" })) {
      assert.ok(frame.messages.length > 0);
      break;
    }
    assert.equal((await client.getAgent(agentId)).agent?.agentId, agentId); // the client still works
  });

  it("refuses a wrong API key with UnauthenticatedError", async () => {
    const wrong = new EpisodicClient(server.address, { apiKey: "epk_not_a_key_of_this_server" });
    try {
      const error = await rejectionOf(wrong.getAgent("anything"));
      assert.ok(error instanceof UnauthenticatedError, String(error));
      assert.equal(error.code, GrpcStatus.UNAUTHENTICATED);
    } finally {
      wrong.close();
    }
  });

  it("refuses a call without an API key with UnauthenticatedError", async () => {
    const anonymous = new EpisodicClient(server.address);
    try {
      assert.ok((await rejectionOf(anonymous.listAgents())) instanceof UnauthenticatedError);
    } finally {
      anonymous.close();
    }
  });

  it("rejects calls on a closed client with ClientClosedError, unary and streaming", async () => {
    const closing = new EpisodicClient(server.address, { apiKey: server.apiKey });
    await closing.listAgents();
    closing.close();
    closing.close(); // twice is harmless
    const unary = await rejectionOf(closing.getAgent("anything"));
    assert.ok(unary instanceof ClientClosedError, String(unary));
    assert.ok(unary instanceof EpisodicError);
    assert.match(unary.message, /closed/);
    const stream = await rejectionOf(closing.renderContext("anything"));
    assert.ok(stream instanceof ClientClosedError, String(stream));
  });

  it("reports an unreachable server as UnavailableError", async () => {
    const nowhere = new EpisodicClient("127.0.0.1:1", { apiKey: server.apiKey, deadlineMs: 5_000 });
    try {
      const error = await rejectionOf(nowhere.listAgents());
      assert.ok(error instanceof UnavailableError, String(error));
    } finally {
      nowhere.close();
    }
  });
});
