import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";

import {
  AlreadyExistsError,
  ContextSection,
  DocumentFormat,
  EpisodicClient,
  InvalidArgumentError,
  KnowledgeFate,
  KnowledgeOrigin,
  NotFoundError,
  PermissionDeniedError,
} from "../src/index.js";
import { rejectionOf, uniqueId } from "./helpers.js";
import { type RunningServer, startServer } from "./server.js";

const HANDBOOK = `# Employee handbook

## Leave

Employees get 25 days of paid leave a year. Unused days carry over until March. Leave is
requested in the HR portal at least two weeks ahead; a manager approves it within three
working days. Part-time staff get leave in proportion to their hours.

## Expenses

Travel expenses are reimbursed within 30 days when filed with receipts. Meals on travel days
are covered up to 40 euros a day; hotels up to 150 euros a night unless a manager agrees to
more before the trip.
`;
const PARKING = "Parking permits come from the facilities desk on the ground floor.";
const POLICY = "Contractors follow their agency's leave rules, not the handbook.";

describe("EpisodicClient knowledge against a live server", () => {
  let server: RunningServer;
  let client: EpisodicClient;
  let reader: EpisodicClient;

  before(async () => {
    server = await startServer();
    client = new EpisodicClient(server.address, { apiKey: server.apiKey });
    reader = new EpisodicClient(server.address, { apiKey: server.readerApiKey });
  });

  after(async () => {
    client?.close();
    reader?.close();
    await server?.stop();
  });

  it("creates, reads, lists, searches, updates and deletes documents", async () => {
    const agentId = uniqueId("agent");
    await client.createAgent(agentId);
    const made = await client.createDocuments(agentId, [
      { documentId: "handbook", text: HANDBOOK, title: "Handbook", metadata: { team: "hr" } },
      { documentId: "parking", text: PARKING, format: "text" },
    ]);
    assert.deepEqual(
      made.results.map((r) => [r.document?.documentId, r.created]),
      [
        ["handbook", true],
        ["parking", true],
      ],
    );
    assert.equal(made.results[1]?.document?.format, DocumentFormat.DOCUMENT_FORMAT_TEXT);
    const retried = await client.createDocuments(agentId, [{ documentId: "parking", text: PARKING, format: "text" }]);
    assert.equal(retried.results[0]?.created, false);
    const conflict = await rejectionOf(client.createDocuments(agentId, [{ documentId: "parking", text: "other" }]));
    assert.ok(conflict instanceof AlreadyExistsError, String(conflict));

    const got = await client.getDocument(agentId, "handbook", { includeChunks: true });
    assert.equal(got.document?.text, HANDBOOK);
    assert.equal(got.chunks.length, got.document?.chunkCount);
    assert.deepEqual(got.chunks.at(-1)?.headingPath, ["Employee handbook", "Expenses"]);
    assert.equal((await client.getDocument(agentId, "parking")).chunks.length, 0);

    const first = await client.listDocuments(agentId, { pageSize: 1 });
    assert.deepEqual(
      first.documents.map((d) => d.documentId),
      ["handbook"],
    );
    const second = await client.listDocuments(agentId, { pageSize: 1, pageToken: first.nextPageToken });
    assert.deepEqual(
      second.documents.map((d) => d.documentId),
      ["parking"],
    );
    const onlyHr = await client.listDocuments(agentId, { metadata: { team: "hr" } });
    assert.deepEqual(
      onlyHr.documents.map((d) => d.documentId),
      ["handbook"],
    );

    const { hits } = await reader.searchKnowledge(agentId, "how many days of paid leave", { topK: 3 });
    assert.equal(hits[0]?.chunk?.documentId, "handbook");
    assert.match(hits[0]!.chunk!.text, /25 days/);
    assert.equal(hits[0]?.document?.title, "Handbook");
    const recent = await client.searchKnowledge(agentId, "", { mode: "recency", updatedAfter: new Date(Date.now() + 86_400_000) });
    assert.equal(recent.hits.length, 0);

    const expiry = new Date(Date.now() + 30 * 86_400_000);
    const retitled = await client.updateDocument(agentId, "parking", { title: "Parking", expireTime: expiry });
    assert.equal(retitled.document?.title, "Parking");
    assert.equal(retitled.document?.expireTime?.getTime(), expiry.getTime());
    const rewritten = await client.updateDocument(agentId, "parking", {
      text: "Bicycles go in the basement garage.",
      expireTime: null,
    });
    assert.equal(rewritten.document?.title, "Parking");
    assert.equal(rewritten.document?.expireTime, undefined);
    const bikes = await client.searchKnowledge(agentId, "bicycles basement garage", { mode: "hybrid" });
    assert.equal(bikes.hits[0]?.chunk?.documentId, "parking");

    await client.deleteDocument(agentId, "parking");
    const missing = await rejectionOf(client.getDocument(agentId, "parking"));
    assert.ok(missing instanceof NotFoundError, String(missing));
    const after = await client.searchKnowledge(agentId, "bicycles basement garage");
    assert.ok(after.hits.every((h) => h.chunk?.documentId !== "parking"));
  });

  it("decodes knowledge errors: a read-only key, an empty update, an unknown format", async () => {
    const agentId = uniqueId("agent");
    await client.createAgent(agentId);
    const denied = await rejectionOf(reader.createDocuments(agentId, [{ documentId: "d", text: "text" }]));
    assert.ok(denied instanceof PermissionDeniedError, String(denied));
    await client.createDocuments(agentId, [{ documentId: "d", text: "Some text." }]);
    const empty = await rejectionOf(client.updateDocument(agentId, "d", {}));
    assert.ok(empty instanceof InvalidArgumentError, String(empty));
    assert.deepEqual(
      empty.fieldViolations.map((v) => v.field),
      ["update_mask"],
    );
    const badFormat = await rejectionOf(
      client.createDocuments(agentId, [{ documentId: "e", text: "x", format: "html" as "text" }]),
    );
    assert.ok(badFormat instanceof InvalidArgumentError, String(badFormat));
    assert.deepEqual(
      badFormat.fieldViolations.map((v) => v.field),
      ["documents[0].format"],
    );
  });

  it("renders caller knowledge and the agent's chunks in buildContext, as the model call stores", async () => {
    const agentId = uniqueId("agent");
    await client.createAgent(agentId, { systemPrompt: "You are the HR assistant." });
    await client.createDocuments(agentId, [{ documentId: "handbook", text: HANDBOOK, title: "Handbook" }]);
    const { episode } = await client.openEpisode(agentId, "user-1");
    const built = await client.renderContext(episode!.episodeId, {
      userMessage: "How many days of paid leave do I get?",
      appendUserMessage: true,
      knowledge: [
        { text: POLICY, sourceId: "crm/42", score: 0.7 },
        { text: "Sick leave needs a doctor's note.", sourceId: "hr/sick", title: "Sick leave", score: 0.9 },
      ],
    });
    assert.deepEqual(
      built.messages.map((m) => m.section),
      [
        ContextSection.CONTEXT_SECTION_SYSTEM,
        ContextSection.CONTEXT_SECTION_KNOWLEDGE,
        ContextSection.CONTEXT_SECTION_USER_MESSAGE,
      ],
    );
    const section = built.messages[1]!.content;
    const { knowledge } = built.report;
    assert.deepEqual(
      knowledge.filter((k) => k.origin === KnowledgeOrigin.KNOWLEDGE_ORIGIN_REQUEST).map((k) => [k.sourceId, k.fate]),
      [
        ["hr/sick", KnowledgeFate.KNOWLEDGE_FATE_WHOLE],
        ["crm/42", KnowledgeFate.KNOWLEDGE_FATE_WHOLE],
      ],
    );
    const mine = knowledge.find((k) => k.sourceId === "crm/42")!;
    assert.equal(section.slice(mine.startChar, mine.endChar), POLICY);
    const stored = knowledge.filter((k) => k.origin === KnowledgeOrigin.KNOWLEDGE_ORIGIN_STORED);
    assert.equal(stored[0]?.documentId, "handbook");
    assert.match(section.slice(stored[0]!.startChar, stored[0]!.endChar), /25 days/);
    assert.equal(built.report.sectionTokens?.knowledge, built.messages[1]!.tokenCount);

    const { modelCall } = await client.getModelCall(built.report.modelCallId);
    assert.deepEqual(modelCall?.report, built.report);
    assert.deepEqual(modelCall?.messages, built.messages);

    const withoutDocuments = await client.renderContext(episode!.episodeId, {
      userMessage: "Paid leave?",
      knowledge: [{ text: POLICY, sourceId: "crm/42" }],
      memoryConfig: { knowledge: false },
    });
    assert.deepEqual(
      withoutDocuments.report.knowledge.map((k) => k.origin),
      [KnowledgeOrigin.KNOWLEDGE_ORIGIN_REQUEST],
    );
  });
});
