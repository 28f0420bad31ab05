/**
 * listUsers / iterUsers and deleteAgent against a live server: an agent's users page by page
 * with their counts, a deletion refused while the agent holds data, then erased with it.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";

import { EpisodicClient, FailedPreconditionError, MemoryKind, NotFoundError } from "../src/index.js";
import { rejectionOf, uniqueId } from "./helpers.js";
import { type RunningServer, startServer } from "./server.js";

describe("EpisodicClient lists an agent's users and deletes agents, against a live server", () => {
  let server: RunningServer;
  let client: EpisodicClient;

  before(async () => {
    server = await startServer();
    client = new EpisodicClient(server.address, { apiKey: server.apiKey, deadlineMs: 30_000 });
  });

  after(async () => {
    client?.close();
    await server?.stop();
  });

  it("lists users page by page with their counts, and deletes the agent only with its data", async () => {
    const agentId = uniqueId("agent");
    await client.createAgent(agentId, { systemPrompt: "Be brief.", model: "gpt-4o" });
    for (const userId of ["carol", "alice", "bob", "alice"]) {
      const episodeId = (await client.openEpisode(agentId, userId)).episode!.episodeId;
      await client.addMessage(episodeId, "user", `Hello, I am ${userId}.`);
    }
    await client.createMemories(agentId, "dave", [{ text: "Keeps bees", kind: MemoryKind.MEMORY_KIND_FACT }]);

    const first = await client.listUsers(agentId, { pageSize: 3 });
    assert.equal(first.users.length, 3);
    assert.ok(first.nextPageToken);
    const users = [];
    for await (const user of client.iterUsers(agentId, { pageSize: 2 })) users.push(user);
    assert.deepEqual(
      users.map((u) => [u.userId, u.episodeCount, u.openEpisodeCount, u.memoryCount]),
      [
        ["alice", 2, 2, 0],
        ["bob", 1, 1, 0],
        ["carol", 1, 1, 0],
        ["dave", 0, 0, 1],
      ],
    );
    assert.ok(users.every((u) => u.lastActivityTime instanceof Date));

    const refused = await rejectionOf(client.deleteAgent(agentId));
    assert.ok(refused instanceof FailedPreconditionError);
    assert.equal(refused.reason, "AGENT_HOLDS_DATA");
    const receipt = (await client.deleteAgent(agentId, { eraseData: true })).receipt!;
    assert.deepEqual([receipt.users, receipt.episodes, receipt.messages, receipt.memories], [4, 4, 4, 1]);
    assert.equal(receipt.erasureIds.length, 4);
    assert.ok((await rejectionOf(client.listUsers(agentId))) instanceof NotFoundError);
    assert.ok((await rejectionOf(client.getAgent(agentId))) instanceof NotFoundError);

    await client.createAgent(agentId, { model: "gpt-4o" }); // the id is free again, holding nothing
    assert.deepEqual((await client.listUsers(agentId)).users, []);
    assert.equal((await client.deleteAgent(agentId)).receipt!.users, 0);
  });
});
