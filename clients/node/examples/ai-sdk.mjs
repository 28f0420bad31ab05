// The Vercel AI SDK with Episodic memory: a user talks to a model in two sessions; in the
// second, the model's prompt carries what Episodic recalled from the first. The model is the
// SDK's scripted mock (no network, no API key), so what it received can be printed and checked.
//
//     EPISODIC_ADDRESS=127.0.0.1:50051 node examples/ai-sdk.mjs      (after npm ci && npm run build)
//
// EPISODIC_ADDRESS defaults to 127.0.0.1:50051; EPISODIC_API_KEY is sent when set (a server
// started with `episodic serve --insecure-dev` needs none). Exits 0 only if something the user
// said in session 1 reached the model in session 2.
import { randomUUID } from "node:crypto";
import { setTimeout as delay } from "node:timers/promises";

import { AlreadyExistsError, EpisodicClient } from "@episodic/client";
import { episodicMiddleware } from "@episodic/client/ai-sdk";
import { generateText, wrapLanguageModel } from "ai";
import { MockLanguageModelV4 } from "ai/test";

const AGENT_ID = "ai-sdk-travel-desk";
// A new user each run, so that only this run's session 1 can be recalled.
const USER_ID = `traveller-${randomUUID().slice(0, 8)}`;
const SESSION_1 = ["I'm planning a trip to Reykjavik in March.", "I hate early flights, nothing before 10am please."];
const SESSION_2 = "Can you suggest flights for my trip?";

const client = new EpisodicClient(process.env.EPISODIC_ADDRESS ?? "127.0.0.1:50051", {
  apiKey: process.env.EPISODIC_API_KEY || undefined,
});
try {
  try {
    await client.createAgent(AGENT_ID, {
      systemPrompt: "You are a travel desk. Use what you know about the traveller.",
    });
  } catch (error) {
    if (!(error instanceof AlreadyExistsError)) throw error; // created by an earlier run
  }

  console.log(`session 1 (user ${USER_ID})`);
  const first = await session(["Reykjavik in March, noted.", "Understood: late departures only."]);
  for (const text of SESSION_1) await say(first, text);
  await client.closeEpisode(first.episodeId, { waitForDigest: true, deadlineMs: 30_000 });
  await untilRecallable("Reykjavik trip flights");

  console.log("session 2");
  const second = await session(["Here are some late-morning flights to Reykjavik."]);
  await say(second, SESSION_2);
  await client.closeEpisode(second.episodeId);

  const received = second.mock.doGenerateCalls[0].prompt;
  console.log("what the model received in session 2:");
  for (const message of received) console.log(`  ${message.role.padEnd(9)} ${oneLine(textOf(message), 110)}`);
  const carried = ["Reykjavik", "March", "10am"].filter((word) => received.some((m) => textOf(m).includes(word)));
  console.log(
    carried.length > 0 ? `recalled from session 1: ${carried.join(", ")}` : "nothing from session 1 reached the model",
  );
  process.exitCode = carried.length > 0 ? 0 : 1;
} finally {
  client.close();
}

/** A new episode of the user, and a scripted model behind the Episodic middleware. */
async function session(replies) {
  const { episode } = await client.openEpisode(AGENT_ID, USER_ID, { metadata: { channel: "ai-sdk-example" } });
  const mock = new MockLanguageModelV4({
    doGenerate: replies.map((text) => ({
      content: [{ type: "text", text }],
      finishReason: { unified: "stop", raw: "stop" },
      usage: { inputTokens: { total: undefined }, outputTokens: { total: undefined } },
      warnings: [],
    })),
  });
  const model = wrapLanguageModel({
    model: mock,
    middleware: episodicMiddleware({ client, episodeId: episode.episodeId }),
  });
  return { episodeId: episode.episodeId, mock, model };
}

async function say({ model }, text) {
  const { text: answer } = await generateText({ model, prompt: text });
  console.log(`  user:      ${text}\n  assistant: ${answer}`);
}

/** A closed episode is recallable once its digest is ready: wait for it, a bounded while. */
async function untilRecallable(query) {
  for (let attempt = 0; attempt < 100; attempt++) {
    const { snippets } = await client.searchEpisodes(AGENT_ID, USER_ID, query);
    if (snippets.length > 0) return;
    await delay(100);
  }
  throw new Error(`session 1 did not become recallable for "${query}"`);
}

function textOf(message) {
  if (typeof message.content === "string") return message.content;
  return message.content.map((part) => (part.type === "text" ? part.text : `[${part.type}]`)).join(" ");
}

function oneLine(text, width) {
  const flat = text.replace(/\s+/g, " ").trim();
  return flat.length > width ? `${flat.slice(0, width - 1)}…` : flat;
}
