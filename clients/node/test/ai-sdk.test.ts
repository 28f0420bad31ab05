/** The Vercel AI SDK middleware and memory tools, driven by the SDK's mock model against a live server. */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { dirname, resolve } from "node:path";
import { after, before, describe, it } from "node:test";
import { setTimeout as delay } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

import { generateText, type ModelMessage, stepCountIs, streamText, wrapLanguageModel } from "ai";
import { convertArrayToReadableStream, MockLanguageModelV4 } from "ai/test";

import {
  type EpisodicReplyMetadata,
  episodicMiddleware,
  episodicTools,
  type ModelPrompt,
  toModelPrompt,
  UnsupportedContentError,
} from "../src/ai-sdk.js";
import { ContextSection, EpisodicClient, Role } from "../src/index.js";
import { rejectionOf, uniqueId } from "./helpers.js";
import { type RunningServer, startServer } from "./server.js";

const EXAMPLE = resolve(dirname(fileURLToPath(import.meta.url)), "../../examples/ai-sdk.mjs");

type GenerateResult = Awaited<ReturnType<MockLanguageModelV4["doGenerate"]>>;
type ReplyPart = GenerateResult["content"][number];

const USAGE = {
  inputTokens: { total: 42, noCache: 42, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 7, text: 7, reasoning: undefined },
};

function reply(...content: ReplyPart[]): GenerateResult {
  const calls = content.some((p) => p.type === "tool-call");
  return {
    content,
    finishReason: { unified: calls ? "tool-calls" : "stop", raw: undefined },
    usage: USAGE,
    warnings: [],
  };
}

function text(value: string): ReplyPart {
  return { type: "text", text: value };
}

function toolCall(toolName: string, input: Record<string, unknown>): ReplyPart {
  return { type: "tool-call", toolCallId: uniqueId("call"), toolName, input: JSON.stringify(input) };
}

/** A mock model answering with `replies` in turn; its `doGenerateCalls` are what it received. */
function scripted(...replies: GenerateResult[]): MockLanguageModelV4 {
  return new MockLanguageModelV4({ doGenerate: replies });
}

function promptOf(mock: MockLanguageModelV4, call: number): ModelPrompt {
  const options = mock.doGenerateCalls[call];
  assert.ok(options, `the model was called ${mock.doGenerateCalls.length} times, not ${call + 1}`);
  return options.prompt;
}

/** Everything the model received as system text, and its turns as "role: text" lines. */
function seen(prompt: ModelPrompt): { system: string; turns: string[] } {
  const system = prompt.flatMap((m) => (m.role === "system" ? [m.content] : [])).join("\n\n");
  const turns = prompt.flatMap((m) => {
    if (m.role === "system") return [];
    const parts = m.content.map((p) => {
      if (p.type === "text") return p.text;
      if (p.type === "tool-call") return `[call ${p.toolName} ${p.toolCallId}]`;
      if (p.type === "tool-result") return `[result ${p.toolName} ${p.toolCallId}]`;
      return `[${p.type}]`;
    });
    return [`${m.role}: ${parts.join(" ")}`];
  });
  return { system, turns };
}

function episodicOf(metadata: unknown): EpisodicReplyMetadata {
  const found = (metadata as { episodic?: EpisodicReplyMetadata } | undefined)?.episodic;
  assert.ok(found, `no episodic provider metadata in ${JSON.stringify(metadata)}`);
  return found;
}

describe("Vercel AI SDK integration against a live server", () => {
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

  async function openEpisode(agentId: string, userId: string): Promise<string> {
    return (await client.openEpisode(agentId, userId)).episode!.episodeId;
  }

  async function logOf(episodeId: string): Promise<string[]> {
    const { messages } = await client.listMessages(episodeId);
    return messages.reverse().map((m) => {
      const calls = m.toolCalls.map((c) => ` [call ${c.toolName}]`).join("");
      const result = m.toolResult ? ` [answers ${m.toolResult.toolCallId}]` : "";
      return `${Role[m.role]}: ${m.content}${calls}${result}`;
    });
  }

  it("generateText: logs two turns, renders the log as the prompt, and records each reply", async () => {
    const agentId = uniqueId("agent");
    await client.createAgent(agentId, { systemPrompt: "You are the ferry desk." });
    const episodeId = await openEpisode(agentId, "user-ferry");
    const mock = scripted(reply(text("At 07:40 from pier 3.")), reply(text("Sundays at 09:10.")));
    const model = wrapLanguageModel({ model: mock, middleware: episodicMiddleware({ client, episodeId }) });

    const first = await generateText({ model, prompt: "When does the Skerryvore ferry leave?" });
    assert.equal(first.text, "At 07:40 from pier 3.");
    // The app passes its whole history again: only the new user message is logged.
    const messages: ModelMessage[] = [
      { role: "user", content: "When does the Skerryvore ferry leave?" },
      ...first.response.messages,
      { role: "user", content: "And on Sundays?" },
    ];
    const second = await generateText({ model, messages });

    assert.deepEqual(seen(promptOf(mock, 1)), {
      system: "You are the ferry desk.",
      turns: [
        "user: When does the Skerryvore ferry leave?",
        "assistant: At 07:40 from pier 3.",
        "user: And on Sundays?",
      ],
    });
    assert.deepEqual(await logOf(episodeId), [
      "ROLE_USER: When does the Skerryvore ferry leave?",
      "ROLE_ASSISTANT: At 07:40 from pier 3.",
      "ROLE_USER: And on Sundays?",
      "ROLE_ASSISTANT: Sundays at 09:10.",
    ]);
    const recorded = episodicOf(second.providerMetadata);
    assert.equal(recorded.episodeId, episodeId);
    assert.equal(recorded.assistantMessageSeq, 4);
    const { modelCall } = await client.getModelCall(recorded.modelCallId);
    assert.equal(modelCall?.episodeId, episodeId);
    assert.equal(modelCall?.reply?.assistantMessageSeq, 4);
    assert.equal(modelCall?.reply?.inputTokens, 42);
    assert.equal(modelCall?.reply?.outputTokens, 7);
    assert.ok(modelCall?.reply?.latency !== undefined);
    assert.equal(modelCall?.messages.at(-1)?.section, ContextSection.CONTEXT_SECTION_USER_MESSAGE);
  });

  it("streamText: the streamed reply is logged at its finish and recorded on its model call", async () => {
    const agentId = uniqueId("agent");
    await client.createAgent(agentId);
    const episodeId = await openEpisode(agentId, "user-stream");
    const mock = new MockLanguageModelV4({
      doStream: {
        stream: convertArrayToReadableStream([
          { type: "stream-start", warnings: [] },
          { type: "text-start", id: "t1" },
          { type: "text-delta", id: "t1", delta: "The lamp is " },
          { type: "text-delta", id: "t1", delta: "blue." },
          { type: "text-end", id: "t1" },
          { type: "finish", finishReason: { unified: "stop", raw: "stop" }, usage: USAGE },
        ]),
      },
    });
    const model = wrapLanguageModel({ model: mock, middleware: episodicMiddleware({ client, episodeId }) });

    const result = streamText({ model, system: "Answer in five words.", prompt: "What colour is the lamp?" });
    assert.equal(await result.text, "The lamp is blue.");

    assert.deepEqual(seen(mock.doStreamCalls[0]!.prompt), {
      system: "Answer in five words.",
      turns: ["user: What colour is the lamp?"],
    });
    assert.deepEqual(await logOf(episodeId), [
      "ROLE_USER: What colour is the lamp?",
      "ROLE_ASSISTANT: The lamp is blue.",
    ]);
    const recorded = episodicOf(await result.providerMetadata);
    const { modelCall } = await client.getModelCall(recorded.modelCallId);
    assert.equal(modelCall?.reply?.assistantMessageSeq, 2);
    assert.equal(modelCall?.reply?.outputTokens, 7);
    assert.equal(modelCall?.messages[0]?.content, "Answer in five words."); // the prompt's system overrides the agent's
  });

  it("streamText with tools: logs the streamed tool call, its result, then the answer", async () => {
    const agentId = uniqueId("agent");
    await client.createAgent(agentId);
    const userId = uniqueId("user");
    const episodeId = await openEpisode(agentId, userId);
    const callId = uniqueId("call");
    const finish = (unified: "stop" | "tool-calls") => ({
      type: "finish" as const,
      finishReason: { unified, raw: undefined },
      usage: USAGE,
    });
    const mock = new MockLanguageModelV4({
      doStream: [
        {
          stream: convertArrayToReadableStream([
            { type: "tool-input-start", id: callId, toolName: "remember" },
            { type: "tool-input-delta", id: callId, delta: '{"text":"Takes the 07:40 ferry","kind":"fact"}' },
            { type: "tool-input-end", id: callId },
            {
              type: "tool-call",
              toolCallId: callId,
              toolName: "remember",
              input: '{"text":"Takes the 07:40 ferry","kind":"fact"}',
            },
            finish("tool-calls"),
          ]),
        },
        {
          stream: convertArrayToReadableStream([
            { type: "text-start", id: "t" },
            { type: "text-delta", id: "t", delta: "Remembered." },
            { type: "text-end", id: "t" },
            finish("stop"),
          ]),
        },
      ],
    });
    const model = wrapLanguageModel({ model: mock, middleware: episodicMiddleware({ client, episodeId }) });

    const result = streamText({
      model,
      tools: episodicTools({ client, agentId, userId, episodeId }),
      stopWhen: stepCountIs(2),
      prompt: "I always take the 07:40 ferry.",
    });
    assert.equal(await result.text, "Remembered.");

    const log = await logOf(episodeId);
    assert.deepEqual(log.slice(0, 2), [
      "ROLE_USER: I always take the 07:40 ferry.",
      "ROLE_ASSISTANT:  [call remember]",
    ]);
    assert.match(log[2]!, new RegExp(`^ROLE_TOOL: \\{"memoryId":".+","outcome":"created"\\} \\[answers ${callId}\\]$`));
    assert.equal(log[3], "ROLE_ASSISTANT: Remembered.");
    const { memories } = await client.listMemories(agentId, userId, { episodeId });
    assert.deepEqual(
      memories.map((m) => m.text),
      ["Takes the 07:40 ferry"],
    );
  });

  it("recalls a closed episode in the user's next one: its words reach the model's prompt", async () => {
    const agentId = uniqueId("agent");
    await client.createAgent(agentId, { systemPrompt: "You are a helpful assistant." });
    const userId = uniqueId("user");
    const firstEpisode = await openEpisode(agentId, userId);
    const first = scripted(reply(text("Bees on Mull, lovely.")), reply(text("Heather honey, noted.")));
    const model1 = wrapLanguageModel({
      model: first,
      middleware: episodicMiddleware({ client, episodeId: firstEpisode }),
    });
    await generateText({ model: model1, prompt: "My sister Henrietta keeps bees in Tobermory." });
    await generateText({ model: model1, prompt: "Her heather honey won a prize at the Oban show." });
    await client.closeEpisode(firstEpisode, { waitForDigest: true, deadlineMs: 30_000 });
    await untilRecallable(agentId, userId, "Henrietta bees");

    const secondEpisode = await openEpisode(agentId, userId);
    const second = scripted(
      reply(toolCall("search_conversations", { query: "Henrietta" })),
      reply(text("Your sister Henrietta keeps bees in Tobermory.")),
    );
    const model2 = wrapLanguageModel({
      model: second,
      middleware: episodicMiddleware({ client, episodeId: secondEpisode }),
    });
    const tools = episodicTools({ client, agentId, userId, episodeId: secondEpisode });
    const result = await generateText({
      model: model2,
      tools,
      stopWhen: stepCountIs(2),
      prompt: "What does Henrietta do?",
    });

    const { system } = seen(promptOf(second, 0));
    assert.match(system, /Tobermory/, system); // said only in the first episode
    assert.match(system, /\[Past Conversations\]/, system);
    const found = result.steps[0]!.toolResults[0]!.output as { conversations: { episodeId: string }[] };
    assert.deepEqual(
      found.conversations.map((c) => c.episodeId),
      [firstEpisode],
    );
  });

  it("runs the memory tools through the SDK's tool loop and logs each call and result", async () => {
    const agentId = uniqueId("agent");
    await client.createAgent(agentId);
    const userId = uniqueId("user");
    const episodeId = await openEpisode(agentId, userId);
    const remember = toolCall("remember", { text: "Allergic to hazelnuts", kind: "fact", topics: ["food"] });
    const search = toolCall("search_memories", { query: "hazelnuts allergy" });
    const mock = scripted(reply(remember), reply(search), reply(text("Noted: no hazelnuts.")));
    const model = wrapLanguageModel({ model: mock, middleware: episodicMiddleware({ client, episodeId }) });

    const result = await generateText({
      model,
      tools: episodicTools({ client, agentId, userId, episodeId }),
      stopWhen: stepCountIs(3),
      prompt: "Please remember that I am allergic to hazelnuts.",
    });

    assert.equal(result.text, "Noted: no hazelnuts.");
    const remembered = result.steps[0]!.toolResults[0]!.output as { memoryId: string; outcome: string };
    assert.equal(remembered.outcome, "created");
    const searched = result.steps[1]!.toolResults[0]!.output as { memories: { memoryId: string; text: string }[] };
    assert.equal(searched.memories[0]?.memoryId, remembered.memoryId);
    assert.equal(searched.memories[0]?.text, "Allergic to hazelnuts");
    const callId = (part: ReplyPart): string => (part.type === "tool-call" ? part.toolCallId : "");
    assert.deepEqual(seen(promptOf(mock, 2)).turns, [
      "user: Please remember that I am allergic to hazelnuts.",
      `assistant: [call remember ${callId(remember)}]`,
      `tool: [result remember ${callId(remember)}]`,
      `assistant: [call search_memories ${callId(search)}]`,
      `tool: [result search_memories ${callId(search)}]`,
    ]);
    const log = await logOf(episodeId);
    assert.deepEqual(
      log.map((line) => line.replace(/: .*?( \[|$)/, ":$1")),
      [
        "ROLE_USER:",
        "ROLE_ASSISTANT: [call remember]",
        `ROLE_TOOL: [answers ${callId(remember)}]`,
        "ROLE_ASSISTANT: [call search_memories]",
        `ROLE_TOOL: [answers ${callId(search)}]`,
        "ROLE_ASSISTANT:",
      ],
    );
    assert.match(log[2]!, /"outcome":"created"/);
  });

  it("rejects bad tool arguments back to the model as the tool's error, which is logged as failed", async () => {
    const agentId = uniqueId("agent");
    await client.createAgent(agentId);
    const userId = uniqueId("user");
    const episodeId = await openEpisode(agentId, userId);
    const bad = toolCall("remember", { text: "Likes jazz", kind: "hobby" });
    const mock = scripted(reply(bad), reply(text("Sorry, I could not remember that.")));
    const model = wrapLanguageModel({ model: mock, middleware: episodicMiddleware({ client, episodeId }) });

    await generateText({
      model,
      tools: episodicTools({ client, agentId, userId, episodeId }),
      stopWhen: stepCountIs(2),
      prompt: "Remember that I like jazz.",
    });

    const { messages } = await client.listMessages(episodeId);
    const result = messages.find((m) => m.role === Role.ROLE_TOOL)?.toolResult;
    assert.equal(result?.succeeded, false);
    assert.match(result?.error ?? "", /kind must be one of fact, preference, event/);
  });

  it("appends a user message once when the same turn is sent again after the model failed", async () => {
    const agentId = uniqueId("agent");
    await client.createAgent(agentId);
    const episodeId = await openEpisode(agentId, "user-retry");
    let calls = 0;
    const mock = new MockLanguageModelV4({
      doGenerate: async () => {
        calls += 1;
        if (calls < 3) throw new Error("the provider is down");
        return reply(text("Back again."));
      },
    });
    const wrapped = () => wrapLanguageModel({ model: mock, middleware: episodicMiddleware({ client, episodeId }) });
    const model = wrapped();

    await assert.rejects(generateText({ model, prompt: "Hello?", maxRetries: 0 }), /the provider is down/);
    await assert.rejects(generateText({ model, prompt: "Hello?", maxRetries: 0 }), /the provider is down/);
    // A new middleware (a web app's next request) resumes the unanswered turn too.
    const result = await generateText({ model: wrapped(), prompt: "Hello?", maxRetries: 0 });

    assert.deepEqual(await logOf(episodeId), ["ROLE_USER: Hello?", "ROLE_ASSISTANT: Back again."]);
    const { modelCalls } = await client.listModelCalls(episodeId);
    assert.deepEqual(
      modelCalls.map((c) => c.modelCallId),
      [episodicOf(result.providerMetadata).modelCallId],
    );
    const next = await generateText({ model: wrapped(), prompt: "Hello?", maxRetries: 0 }); // answered: a new turn
    assert.equal(next.text, "Back again.");
    assert.equal((await logOf(episodeId)).length, 4);
  });

  it("refuses an image, a file or a prefilled reply in the prompt, naming it, and logs nothing", async () => {
    const agentId = uniqueId("agent");
    await client.createAgent(agentId);
    const episodeId = await openEpisode(agentId, "user-image");
    const mock = scripted(reply(text("never reached")));
    const model = wrapLanguageModel({ model: mock, middleware: episodicMiddleware({ client, episodeId }) });
    const png = new Uint8Array([137, 80, 78, 71, 13, 10, 26, 10]);
    const pdf = new TextEncoder().encode("%PDF-1.7\n");

    const refusals = [
      generateText({
        model,
        messages: [
          {
            role: "user",
            content: [
              { type: "text", text: "What is this?" },
              { type: "file", data: png, mediaType: "image/png" },
            ],
          },
        ],
      }),
      generateText({
        model,
        messages: [{ role: "user", content: [{ type: "file", data: pdf, mediaType: "application/pdf" }] }],
      }),
      generateText({
        model,
        messages: [
          { role: "user", content: "Name a lighthouse." },
          { role: "assistant", content: "The lighthouse at" },
        ],
      }),
    ];
    for (const [refusal, what] of [
      [refusals[0]!, /prompt message 0 \(user\): a file \(image\/png\) part is not supported \(text\)/],
      [refusals[1]!, /prompt message 0 \(user\): a file \(application\/pdf\) part is not supported \(text\)/],
      [refusals[2]!, /prompt message 1 \(assistant\) ends the prompt: a prefilled reply cannot be rendered last/],
    ] as const) {
      const error = await rejectionOf(refusal);
      assert.ok(error instanceof UnsupportedContentError, String(error));
      assert.match(error.message, what);
    }
    assert.equal(mock.doGenerateCalls.length, 0);
    assert.deepEqual(await logOf(episodeId), []);
  });

  it("refuses a reply it cannot log (a generated file), naming it", async () => {
    const agentId = uniqueId("agent");
    await client.createAgent(agentId);
    const episodeId = await openEpisode(agentId, "user-file-reply");
    const file: ReplyPart = { type: "file", mediaType: "image/png", data: { type: "data", data: "iVBORw0KGgo=" } };
    const mock = scripted(reply(text("Here is a picture:"), file));
    const model = wrapLanguageModel({ model: mock, middleware: episodicMiddleware({ client, episodeId }) });

    const error = await rejectionOf(generateText({ model, prompt: "Draw me a lighthouse." }));
    assert.ok(error instanceof UnsupportedContentError, String(error));
    assert.match(error.message, /reply part 1: a file \(image\/png\) part cannot be logged/);
  });

  it("toModelPrompt: pairs tool results with their calls, places system text, refuses what it cannot carry", () => {
    const message = (index: number, role: Role, content: string, extra: object = {}) => ({
      index,
      role,
      content,
      section: ContextSection.CONTEXT_SECTION_HISTORY,
      toolCalls: [],
      toolCallId: "",
      seq: 0,
      stubbed: false,
      tokenCount: 1,
      contentContinues: false,
      ...extra,
    });
    const call = { toolCallId: "c1", toolName: "lookup", input: { city: "Oban" } };
    const rendered = [
      message(0, Role.ROLE_SYSTEM, "Be brief."),
      message(1, Role.ROLE_USER, "Weather in Oban?"),
      message(2, Role.ROLE_ASSISTANT, "", { toolCalls: [call] }),
      message(3, Role.ROLE_TOOL, '{"sky":"grey"}', { toolCallId: "c1" }),
      message(4, Role.ROLE_CONTEXT, "[Known Facts]\n- lives in Oban"),
      message(5, Role.ROLE_USER, "Thanks."),
    ];
    assert.deepEqual(toModelPrompt(rendered), [
      { role: "system", content: "Be brief." },
      { role: "user", content: [{ type: "text", text: "Weather in Oban?" }] },
      {
        role: "assistant",
        content: [{ type: "tool-call", toolCallId: "c1", toolName: "lookup", input: { city: "Oban" } }],
      },
      {
        role: "tool",
        content: [
          {
            type: "tool-result",
            toolCallId: "c1",
            toolName: "lookup",
            output: { type: "text", value: '{"sky":"grey"}' },
          },
        ],
      },
      { role: "system", content: "[Known Facts]\n- lives in Oban" },
      { role: "user", content: [{ type: "text", text: "Thanks." }] },
    ]);
    assert.deepEqual(
      toModelPrompt(rendered, { systemPlacement: "leading" }).map((m) => m.role),
      ["system", "system", "user", "assistant", "tool", "user"],
    );
    assert.throws(
      () => toModelPrompt([message(0, Role.ROLE_TOOL, "{}", { toolCallId: "gone" })]),
      /message 0 answers tool call gone, which is not rendered/,
    );
    assert.throws(
      () => toModelPrompt([message(0, Role.ROLE_USER, "par", { contentContinues: true })]),
      /message 0 is a part of a streamed message/,
    );
    assert.throws(() => toModelPrompt([message(0, 9 as Role, "?")]), /message 0 has role 9/);
  });

  it("examples/ai-sdk.mjs: what the user said in session 1 reaches the model in session 2", async () => {
    const env = { ...process.env, EPISODIC_ADDRESS: server.address, EPISODIC_API_KEY: server.apiKey };
    const { stdout } = await promisify(execFile)(process.execPath, [EXAMPLE], { env }); // rejects unless it exits 0
    const received = stdout.slice(stdout.indexOf("what the model received in session 2:"));
    assert.match(received, /^ {2}system +\[Past Conversations\].*$/m, stdout);
    assert.match(received, /^ {2}user +Can you suggest flights for my trip\?$/m, stdout);
    assert.match(stdout.trimEnd().split("\n").at(-1)!, /^recalled from session 1: .*Reykjavik/, stdout);
  });

  /** Polls (bounded) until the user's closed episode is searchable: its digest is READY. */
  async function untilRecallable(agentId: string, userId: string, query: string): Promise<void> {
    for (let attempt = 0; attempt < 100; attempt++) {
      const { snippets } = await client.searchEpisodes(agentId, userId, query);
      if (snippets.length > 0) return;
      await delay(100);
    }
    assert.fail(`no episode of ${userId} became recallable for "${query}"`);
  }
});
