/**
 * The Vercel AI SDK (`ai` 7) over Episodic: `import { episodicMiddleware, episodicTools } from
 * "@episodic/client/ai-sdk"`. Only this module imports `ai` (an optional peer dependency), so
 * the rest of the client works without it.
 *
 * `episodicMiddleware({ client, episodeId })` is a `LanguageModelMiddleware` for
 * `wrapLanguageModel`: the episode's log is the conversation, and Episodic decides what the
 * model sees. Before each model call (generate and stream alike) it
 * - logs what is new in the prompt: the messages after its last assistant message. The last
 *   one, when it is a user message, is appended by BuildContext itself (`append_user_message`,
 *   rendered as the current user message); the others (tool results, earlier user or system
 *   messages) by one AddMessages call, a tool result answering its call by id;
 * - streams BuildContext and puts the rendered context in place of the prompt: system and
 *   context messages (recalled conversations, known facts, knowledge, summary) become `system`
 *   messages, history turns `user` / `assistant` / `tool` messages with tool calls and results
 *   paired by id (`toModelPrompt`). The prompt's leading system messages (generateText's
 *   `system`) override the agent's system prompt for that call;
 * - after the model's reply (a generate result, or a stream at its `finish` part) logs it as an
 *   assistant message (text and tool calls) and records it on the model call (RecordModelReply:
 *   usage, latency, the message's seq). The result's `providerMetadata.episodic` names the
 *   episode, the model call and the logged message.
 * Retries are safe: ids derive from the log position the turn started at, so the SDK's retry of
 * a failed call, or the same turn sent again before any reply (by this middleware or a new one,
 * as a web app makes per request), appends nothing twice and reuses the stored model call
 * (`client_message_id`, `request_id`).
 *
 * `episodicTools({ client, agentId, userId })` are the SDK `tool()`s `search_memories`
 * (SearchMemories), `search_conversations` (SearchEpisodes) and `remember` (CreateMemories).
 *
 * Limits, each refused with an `UnsupportedContentError` naming it, never dropped: content is
 * text, so file parts (images, audio, PDFs) in the prompt, in a tool result or in the reply are
 * refused, as are provider-executed tool calls, tool-approval parts and custom parts; a tool
 * call's input must be a JSON object (a protobuf Struct). The reply's reasoning and sources are
 * not logged (the log keeps what was said), so providers that want reasoning sent back
 * (Anthropic thinking in a tool loop) lose it. Messages before the prompt's last assistant
 * message are not read: they are in the log already (logged by this middleware), and a history
 * from elsewhere is imported with `client.addMessages` first. Per-message `providerOptions` are
 * not carried (the prompt is rebuilt); the call's are.
 */
import { createHash } from "node:crypto";

import { jsonSchema, type LanguageModelMiddleware, type Tool, tool } from "ai";

import type { BuildContextOptions, EpisodicClient, MessageInputLike } from "./client.js";
import type { ContextMessage } from "./gen/episodic/v1/context.js";
import { Role, type ToolCall } from "./gen/episodic/v1/episode.js";
import { type Memory, MemoryKind } from "./gen/episodic/v1/memory.js";
import { MemoryOutcome, MemoryPlacement } from "./gen/episodic/v1/memory_service.js";

// The SDK's model-call types, read off the middleware contract so that only `ai` is needed.
type WrapGenerate = NonNullable<LanguageModelMiddleware["wrapGenerate"]>;
type WrapStream = NonNullable<LanguageModelMiddleware["wrapStream"]>;
type CallParams = Parameters<WrapGenerate>[0]["params"];
type InnerModel = Parameters<WrapGenerate>[0]["model"];
type GenerateResult = Awaited<ReturnType<WrapGenerate>>;
type StreamResult = Awaited<ReturnType<WrapStream>>;
type StreamPart = StreamResult["stream"] extends ReadableStream<infer P> ? P : never;
type ReplyPart = GenerateResult["content"][number];
type Usage = GenerateResult["usage"];
type FinishReason = GenerateResult["finishReason"];
type ProviderMetadata = NonNullable<GenerateResult["providerMetadata"]>;
/** The prompt of a model call (LanguageModelV4Prompt). */
export type ModelPrompt = CallParams["prompt"];
/** One message of a model call's prompt. */
export type ModelPromptMessage = ModelPrompt[number];
type ToolResultPart = Extract<
  Extract<ModelPromptMessage, { role: "tool" }>["content"][number],
  { type: "tool-result" }
>;
type ToolCallPart = Extract<
  Extract<ModelPromptMessage, { role: "assistant" }>["content"][number],
  { type: "tool-call" }
>;

/** Content this integration cannot carry (a file, a custom part...): the message names it. */
export class UnsupportedContentError extends Error {
  override readonly name = "UnsupportedContentError";
}

/** Where the rendered system and context messages go in the prompt. */
export type SystemPlacement = "inline" | "leading";

export interface ToModelPromptOptions {
  /**
   * "inline" (default): each where it was rendered (the instruction sections lead; a system
   * message logged mid-episode stays mid-prompt). "leading": all of them first, in order, for
   * providers that take system text only before the first turn (Anthropic, Google).
   */
  systemPlacement?: SystemPlacement;
}

export interface EpisodicMiddlewareOptions extends ToModelPromptOptions {
  client: EpisodicClient;
  /** The open episode the conversation is logged in (`client.openEpisode(agentId, userId)`). */
  episodeId: string;
  /**
   * BuildContext's other fields for every call: `memoryConfig` overrides, `knowledge`,
   * `model`, `recallQuery`, `deadlineMs`, and `systemPrompt` for calls whose prompt has none.
   */
  buildContext?: Omit<BuildContextOptions, "userMessage" | "appendUserMessage" | "clientMessageId" | "requestId">;
}

/** What the middleware adds to a result's `providerMetadata`, under `episodic`. */
export type EpisodicReplyMetadata = {
  episodeId: string;
  modelCallId: string;
  /** Seq of the logged assistant message; 0 when the reply was empty (nothing logged). */
  assistantMessageSeq: number;
};

/** The middleware for `wrapLanguageModel({ model, middleware: episodicMiddleware({...}) })`. */
export function episodicMiddleware(options: EpisodicMiddlewareOptions): LanguageModelMiddleware {
  const turns = new EpisodeTurns(options);
  return {
    specificationVersion: "v4",
    wrapGenerate: async ({ params, model }) => {
      const turn = await turns.begin(params);
      const started = performance.now();
      const result = await model.doGenerate({ ...params, prompt: turn.prompt });
      const reply = replyOf(result.content);
      const logged = await turns.finish(turn, model, reply, result, performance.now() - started);
      return { ...result, providerMetadata: withEpisodic(result.providerMetadata, logged) };
    },
    wrapStream: async ({ params, model }) => {
      const turn = await turns.begin(params);
      const started = performance.now();
      const { stream, ...rest } = await model.doStream({ ...params, prompt: turn.prompt });
      return { ...rest, stream: stream.pipeThrough(replyRecorder(turns, turn, model, started)) };
    },
  };
}

interface Turn {
  prompt: ModelPrompt;
  modelCallId: string;
  /** The seq this turn's log position started at (its ids derive from it). */
  base: number;
  /** The seq of the user message BuildContext appended (0: none). */
  userMessageSeq: number;
}

interface Reply {
  text: string;
  toolCalls: ToolCall[];
}

/** One episode's turns: logs what is new, builds the context, logs and records the reply. */
class EpisodeTurns {
  /** The newest seq a completed turn left, read from the log on the first call. */
  private base: number | undefined;

  constructor(private readonly options: EpisodicMiddlewareOptions) {}

  async begin(params: CallParams): Promise<Turn> {
    checkPrompt(params.prompt);
    const { system, tail } = splitPrompt(params.prompt);
    const last = tail.at(-1);
    const userText = last?.role === "user" ? userTextOf(last) : "";
    const toLog = last?.role === "user" ? tail.slice(0, -1) : tail;
    const base = (this.base ??= await this.newestSeq());
    const id = `ai-sdk-${base}-${digest([userText, ...toLog.map((m) => JSON.stringify(m.content))])}`;
    const { client, episodeId } = this.options;
    if (toLog.length > 0) {
      await client.addMessages(
        episodeId,
        toLog.flatMap((m, i) => toMessageInputs(m, `${id}-${i}`)),
      );
    }
    const built = await client.renderContext(episodeId, {
      ...this.options.buildContext,
      systemPrompt: system ?? this.options.buildContext?.systemPrompt,
      userMessage: userText,
      appendUserMessage: userText !== "",
      clientMessageId: userText === "" ? "" : `${id}-u`,
      requestId: id,
    });
    return {
      prompt: toModelPrompt(built.messages, this.options),
      modelCallId: built.report.modelCallId,
      base,
      userMessageSeq: built.report.userMessageSeq,
    };
  }

  async finish(
    turn: Turn,
    model: InnerModel,
    reply: Reply,
    result: { usage: Usage; finishReason: FinishReason },
    latencyMs: number,
  ): Promise<EpisodicReplyMetadata> {
    const { client, episodeId } = this.options;
    let seq = 0;
    if (reply.text !== "" || reply.toolCalls.length > 0) {
      const logged = await client.addMessage(episodeId, "assistant", reply.text, {
        clientMessageId: `ai-sdk-${turn.modelCallId}`,
        toolCalls: reply.toolCalls,
        metadata: {
          source: "ai-sdk",
          provider: model.provider,
          model: model.modelId,
          finish: result.finishReason.unified,
        },
      });
      seq = logged.message?.seq ?? 0;
    }
    // The turn is over once its reply is logged: the next one starts after it, even if recording fails.
    this.base = Math.max(seq, turn.userMessageSeq, turn.base);
    await client.recordModelReply(turn.modelCallId, {
      inputTokens: result.usage.inputTokens.total,
      outputTokens: result.usage.outputTokens.total,
      latencyMs: Math.round(latencyMs),
      assistantMessageSeq: seq,
    });
    return { episodeId, modelCallId: turn.modelCallId, assistantMessageSeq: seq };
  }

  /**
   * Where the log stands: its newest seq, or, when the newest message is a user message of a
   * turn that got no reply (the model failed), that turn's base, so that a new middleware
   * sending the turn again (a retried request) resumes it instead of appending it twice.
   */
  private async newestSeq(): Promise<number> {
    const { messages } = await this.options.client.listMessages(this.options.episodeId, { pageSize: 1 });
    const newest = messages[0];
    const unanswered = UNANSWERED_USER_MESSAGE.exec(newest?.role === Role.ROLE_USER ? newest.clientMessageId : "");
    return unanswered ? Number(unanswered[1]) : (newest?.seq ?? 0);
  }
}

// The client_message_id `begin` gives the user message it has BuildContext append.
const UNANSWERED_USER_MESSAGE = /^ai-sdk-(\d+)-[0-9a-f]{16}-u$/;

/** Passes the stream through; at its `finish` part logs and records the reply (none after an error). */
function replyRecorder(
  turns: EpisodeTurns,
  turn: Turn,
  model: InnerModel,
  started: number,
): TransformStream<StreamPart, StreamPart> {
  // The reply in order: a text block by its id (its deltas joined at the end), or a whole part.
  const order: (string | ReplyPart)[] = [];
  const texts = new Map<string, string>();
  let failed = false;
  const content = (): ReplyPart[] =>
    order.map((item) => (typeof item === "string" ? { type: "text", text: texts.get(item) ?? "" } : item));
  return new TransformStream<StreamPart, StreamPart>({
    async transform(part, controller) {
      if (part.type === "text-delta") {
        if (!texts.has(part.id)) order.push(part.id);
        texts.set(part.id, (texts.get(part.id) ?? "") + part.delta);
      } else if (part.type === "error") {
        failed = true;
      } else if (part.type === "finish" && !failed && part.finishReason.unified !== "error") {
        const logged = await turns.finish(turn, model, replyOf(content()), part, performance.now() - started);
        controller.enqueue({ ...part, providerMetadata: withEpisodic(part.providerMetadata, logged) });
        return;
      } else if (isReplyPart(part)) {
        order.push(part);
      }
      controller.enqueue(part);
    },
  });
}

/** The stream parts that are content of the reply (a whole tool call, a file...), not deltas or events. */
function isReplyPart(part: StreamPart): part is StreamPart & ReplyPart {
  return REPLY_PARTS.includes(part.type);
}

const REPLY_PARTS: readonly string[] = [
  "tool-call",
  "tool-result",
  "file",
  "reasoning-file",
  "custom",
  "tool-approval-request",
  "source",
];

function withEpisodic(metadata: ProviderMetadata | undefined, logged: EpisodicReplyMetadata): ProviderMetadata {
  return { ...metadata, episodic: logged };
}

// --- the prompt -> what to log ----------------------------------------------------------

/** Refuses every part of the prompt that the log or the rendered prompt could not carry. */
function checkPrompt(prompt: ModelPrompt): void {
  prompt.forEach((message, index) => {
    const where = `prompt message ${index} (${message.role})`;
    if (message.role === "system") return;
    for (const part of message.content) {
      const allowed = ALLOWED_PARTS[message.role];
      if (!allowed.includes(part.type)) {
        throw new UnsupportedContentError(
          `${where}: a ${describePart(part)} part is not supported (${allowed.join(", ")})`,
        );
      }
      if (part.type === "tool-call" && part.providerExecuted) {
        throw new UnsupportedContentError(`${where}: tool call ${part.toolCallId} was executed by the provider`);
      }
      if (part.type === "tool-result") toolOutputText(part, where);
    }
  });
}

const ALLOWED_PARTS: Record<Exclude<ModelPromptMessage["role"], "system">, readonly string[]> = {
  user: ["text"],
  assistant: ["text", "reasoning", "tool-call"],
  tool: ["tool-result"],
};

function describePart(part: { type: string; mediaType?: unknown }): string {
  return typeof part.mediaType === "string" ? `${part.type} (${part.mediaType})` : part.type;
}

/** The leading system text (undefined: none) and the messages after the last assistant message. */
function splitPrompt(prompt: ModelPrompt): { system: string | undefined; tail: ModelPromptMessage[] } {
  const firstTurn = prompt.findIndex((m) => m.role !== "system");
  const leading = (firstTurn === -1 ? prompt : prompt.slice(0, firstTurn)) as Extract<
    ModelPromptMessage,
    { role: "system" }
  >[];
  const system = leading.length > 0 ? leading.map((m) => m.content).join("\n\n") : undefined;
  const lastAssistant = prompt.findLastIndex((m) => m.role === "assistant");
  if (lastAssistant !== -1 && lastAssistant === prompt.length - 1) {
    throw new UnsupportedContentError(
      `prompt message ${lastAssistant} (assistant) ends the prompt: a prefilled reply cannot be rendered last`,
    );
  }
  const start = Math.max(lastAssistant + 1, firstTurn === -1 ? prompt.length : firstTurn);
  return { system, tail: prompt.slice(start) };
}

function userTextOf(message: Extract<ModelPromptMessage, { role: "user" }>): string {
  return message.content.map((part) => (part.type === "text" ? part.text : "")).join("");
}

/** A message of the prompt's tail as messages to append (a tool message: one per result). */
function toMessageInputs(message: ModelPromptMessage, id: string): MessageInputLike[] {
  switch (message.role) {
    case "system":
      return [{ role: "system", content: message.content, clientMessageId: id }];
    case "user":
      return [{ role: "user", content: userTextOf(message), clientMessageId: id }];
    case "tool":
      return message.content.map((part) => toolResultInput(part as ToolResultPart));
    case "assistant":
      throw new UnsupportedContentError("an assistant message is never in the prompt's tail"); // splitPrompt's cut
  }
}

function toolResultInput(part: ToolResultPart): MessageInputLike {
  const { text, value, succeeded } = toolOutputText(part, `tool result ${part.toolCallId}`);
  return {
    role: "tool",
    content: text,
    clientMessageId: `ai-sdk-result-${digest([part.toolCallId])}`,
    toolResult: { toolCallId: part.toolCallId, output: value, succeeded, error: succeeded ? "" : text },
  };
}

/** A tool result's output as the text the model sees, its JSON value, and whether it succeeded. */
function toolOutputText(part: ToolResultPart, where: string): { text: string; value: unknown; succeeded: boolean } {
  const output = part.output;
  switch (output.type) {
    case "text":
      return { text: output.value, value: output.value, succeeded: true };
    case "json":
      return { text: JSON.stringify(output.value), value: output.value, succeeded: true };
    case "error-text":
      return { text: output.value, value: output.value, succeeded: false };
    case "error-json":
      return { text: JSON.stringify(output.value), value: output.value, succeeded: false };
    case "execution-denied": {
      const text = output.reason ? `execution denied: ${output.reason}` : "execution denied";
      return { text, value: text, succeeded: false };
    }
    case "content": {
      const texts = output.value.map((item) => {
        if (item.type !== "text") {
          throw new UnsupportedContentError(
            `${where}: a ${describePart(item)} part of its output is not supported (text)`,
          );
        }
        return item.text;
      });
      return { text: texts.join(""), value: texts.join(""), succeeded: true };
    }
  }
}

// --- the reply -> an assistant message ---------------------------------------------------

/** The reply's text and tool calls; reasoning and sources are not logged; anything else is refused. */
function replyOf(content: readonly ReplyPart[]): Reply {
  const reply: Reply = { text: "", toolCalls: [] };
  content.forEach((part, index) => {
    if (part.type === "text") {
      reply.text += part.text;
    } else if (part.type === "tool-call" && !part.providerExecuted) {
      reply.toolCalls.push({ toolCallId: part.toolCallId, toolName: part.toolName, input: jsonObject(part) });
    } else if (part.type !== "reasoning" && part.type !== "source") {
      const what = part.type === "tool-call" ? "provider-executed tool-call" : describePart(part);
      throw new UnsupportedContentError(`reply part ${index}: a ${what} part cannot be logged (text, tool-call)`);
    }
  });
  return reply;
}

/** A tool call's JSON input as the object a protobuf Struct carries ("" reads as {}). */
function jsonObject(call: { toolCallId: string; toolName: string; input: string }): Record<string, unknown> {
  let value: unknown = {};
  if (call.input.trim() !== "") {
    try {
      value = JSON.parse(call.input);
    } catch {
      value = undefined;
    }
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new UnsupportedContentError(
      `tool call ${call.toolCallId} (${call.toolName}): its input is not a JSON object: ${call.input.slice(0, 80)}`,
    );
  }
  return value as Record<string, unknown>;
}

// --- the rendered context -> the prompt -------------------------------------------------

/**
 * The rendered context (BuildContext's messages, parts joined) as the SDK's prompt: system and
 * context messages as `system`, user turns as text, assistant turns with their tool calls,
 * consecutive tool results as one `tool` message naming each call. A part of a streamed message,
 * an unknown role or a result whose call is not rendered is refused, naming the message.
 */
export function toModelPrompt(messages: readonly ContextMessage[], options: ToModelPromptOptions = {}): ModelPrompt {
  const names = new Map(messages.flatMap((m) => m.toolCalls.map((c) => [c.toolCallId, c.toolName] as const)));
  const instructions: ModelPromptMessage[] = [];
  const prompt: ModelPrompt = [];
  for (const message of messages) {
    if (message.contentContinues) {
      throw new UnsupportedContentError(
        `message ${message.index} is a part of a streamed message: join the frames first`,
      );
    }
    const converted = toModelMessage(message, names);
    if (converted === undefined) continue;
    const previous = prompt.at(-1);
    if (converted.role === "tool" && previous?.role === "tool") {
      previous.content.push(...converted.content);
    } else if (converted.role === "system" && options.systemPlacement === "leading") {
      instructions.push(converted);
    } else {
      prompt.push(converted);
    }
  }
  return [...instructions, ...prompt];
}

function toModelMessage(message: ContextMessage, names: ReadonlyMap<string, string>): ModelPromptMessage | undefined {
  switch (message.role) {
    case Role.ROLE_SYSTEM:
    case Role.ROLE_CONTEXT:
      return message.content === "" ? undefined : { role: "system", content: message.content };
    case Role.ROLE_USER:
      return { role: "user", content: [{ type: "text", text: message.content }] };
    case Role.ROLE_ASSISTANT: {
      const calls: ToolCallPart[] = message.toolCalls.map((c) => ({
        type: "tool-call",
        toolCallId: c.toolCallId,
        toolName: c.toolName,
        input: c.input ?? {},
      }));
      const text = message.content === "" ? [] : [{ type: "text" as const, text: message.content }];
      return { role: "assistant", content: [...text, ...calls] };
    }
    case Role.ROLE_TOOL: {
      const toolName = names.get(message.toolCallId);
      if (toolName === undefined) {
        throw new UnsupportedContentError(
          `message ${message.index} answers tool call ${message.toolCallId}, which is not rendered`,
        );
      }
      const output = { type: "text" as const, value: message.content };
      return { role: "tool", content: [{ type: "tool-result", toolCallId: message.toolCallId, toolName, output }] };
    }
    default:
      throw new UnsupportedContentError(`message ${message.index} has role ${message.role}, which no prompt carries`);
  }
}

/** A short stable digest of texts, for ids the server accepts ([A-Za-z0-9._:@-]). */
function digest(texts: readonly string[]): string {
  const hash = createHash("sha256");
  for (const text of texts) hash.update(text).update("\u0000");
  return hash.digest("hex").slice(0, 16);
}

// --- memory tools ------------------------------------------------------------------------

export interface EpisodicToolsOptions {
  client: EpisodicClient;
  agentId: string;
  userId: string;
  /**
   * The user's open episode, when the tools run inside one: search also sees its pending
   * memories, and `remember` keeps a memory pending in it (promoted when it closes) unless
   * `placement` is "eager". Without one, `remember` stores long-term at once.
   */
  episodeId?: string;
  placement?: "lazy" | "eager";
  /** The most results a search returns when the model asks for no number (default 5). */
  topK?: number;
  deadlineMs?: number;
}

export interface SearchInput {
  query: string;
  limit?: number;
}

export interface MemoryFound {
  memoryId: string;
  text: string;
  kind: string;
  score: number;
  /** Events: when it happened or will happen (ISO 8601); "" otherwise. */
  eventTime: string;
}

export interface ConversationFound {
  episodeId: string;
  summary: string;
  keyFacts: string[];
  /** When it ended (ISO 8601). */
  endTime: string;
  score: number;
}

export interface RememberInput {
  text: string;
  kind: "fact" | "preference" | "event";
  topics?: string[];
  entities?: string[];
  /** Events: ISO 8601. */
  eventTime?: string;
}

export interface Remembered {
  memoryId: string;
  /** "created", "unchanged", "merged" or "superseded_older". */
  outcome: string;
}

/** The tools by the names the model calls them (a `ToolSet`). */
export type EpisodicTools = {
  search_memories: Tool<SearchInput, { memories: MemoryFound[] }>;
  search_conversations: Tool<SearchInput, { conversations: ConversationFound[]; pendingDigests: number }>;
  remember: Tool<RememberInput, Remembered>;
};

/** The memory tools of (agentId, userId), ready for `generateText({ tools: episodicTools({...}) })`. */
export function episodicTools(options: EpisodicToolsOptions): EpisodicTools {
  const { client, agentId, userId, episodeId, deadlineMs } = options;
  const topK = (limit: number | undefined): number => Math.max(1, Math.min(limit ?? options.topK ?? 5, 50));
  return {
    search_memories: tool({
      description: "Search what is known about the user (facts, preferences, events) from earlier conversations.",
      inputSchema: searchSchema,
      execute: async ({ query, limit }) => {
        const { hits } = await client.searchMemories(agentId, userId, query, {
          topK: topK(limit),
          episodeId,
          deadlineMs,
        });
        return { memories: hits.map((h) => memoryFound(h.memory, h.score)) };
      },
    }),
    search_conversations: tool({
      description: "Search the user's past conversations: each found one's summary and key facts.",
      inputSchema: searchSchema,
      execute: async ({ query, limit }) => {
        const found = await client.searchEpisodes(agentId, userId, query, { topK: topK(limit), deadlineMs });
        return {
          conversations: found.snippets.map((s) => ({
            episodeId: s.episodeId,
            summary: s.summary,
            keyFacts: s.keyFacts,
            endTime: s.endTime?.toISOString() ?? "",
            score: s.score,
          })),
          pendingDigests: found.pendingDigests,
        };
      },
    }),
    remember: tool({
      description:
        "Remember one statement about the user for later conversations: a fact, a preference, or an event (with its time).",
      inputSchema: rememberSchema,
      execute: async (input) => {
        const eager = episodeId === undefined || options.placement === "eager";
        const placement = eager ? MemoryPlacement.MEMORY_PLACEMENT_EAGER : MemoryPlacement.MEMORY_PLACEMENT_LAZY;
        const memory = { ...input, kind: MEMORY_KINDS[input.kind], eventTime: parseTime(input.eventTime) };
        const { results } = await client.createMemories(agentId, userId, [memory], {
          episodeId,
          placement,
          deadlineMs,
        });
        const result = results[0];
        return { memoryId: result?.memory?.memoryId ?? "", outcome: outcomeName(result?.outcome) };
      },
    }),
  };
}

const MEMORY_KINDS: Record<RememberInput["kind"], MemoryKind> = {
  fact: MemoryKind.MEMORY_KIND_FACT,
  preference: MemoryKind.MEMORY_KIND_PREFERENCE,
  event: MemoryKind.MEMORY_KIND_EVENT,
};

function memoryFound(memory: Memory | undefined, score: number): MemoryFound {
  return {
    memoryId: memory?.memoryId ?? "",
    text: memory?.text ?? "",
    kind: enumName(MemoryKind, memory?.kind ?? 0, "MEMORY_KIND_"),
    score,
    eventTime: memory?.eventTime?.toISOString() ?? "",
  };
}

function outcomeName(outcome: MemoryOutcome | undefined): string {
  return enumName(MemoryOutcome, outcome ?? 0, "MEMORY_OUTCOME_");
}

function enumName(values: Record<number, string>, value: number, prefix: string): string {
  const name = values[value] ?? String(value);
  return name.startsWith(prefix) ? name.slice(prefix.length).toLowerCase() : name;
}

function parseTime(text: string | undefined): Date | undefined {
  if (text === undefined || text === "") return undefined;
  const time = new Date(text);
  if (Number.isNaN(time.getTime())) throw new Error(`eventTime ${JSON.stringify(text)} is not an ISO 8601 time`);
  return time;
}

// The tools' input schemas, with a check of their own: the model's arguments are validated
// before `execute` runs, and a mismatch goes back to the model as the tool's error.
type Field = { type: "string" | "integer"; enum?: string[] } | { type: "array"; items: { type: "string" } };

function objectSchema<T>(fields: Record<string, Field & { description: string }>, required: string[]) {
  return jsonSchema<T>(
    { type: "object", properties: fields, required, additionalProperties: false },
    {
      validate: (value) => {
        const problem = schemaProblem(value, fields, required);
        return problem === undefined
          ? { success: true, value: value as T }
          : { success: false, error: new Error(problem) };
      },
    },
  );
}

function schemaProblem(value: unknown, fields: Record<string, Field>, required: string[]): string | undefined {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return "the input is not a JSON object";
  const input = value as Record<string, unknown>;
  for (const name of required) if (input[name] === undefined) return `${name} is required`;
  for (const [name, given] of Object.entries(input)) {
    const field = fields[name];
    if (field === undefined) return `${name} is not a field (${Object.keys(fields).join(", ")})`;
    if (!fits(given, field)) return `${name} must be ${describeField(field)}`;
  }
  return undefined;
}

function fits(value: unknown, field: Field): boolean {
  if (field.type === "array") return Array.isArray(value) && value.every((v) => typeof v === "string");
  if (field.type === "integer") return Number.isInteger(value);
  return typeof value === "string" && (field.enum === undefined || field.enum.includes(value));
}

function describeField(field: Field): string {
  if (field.type === "array") return "a list of strings";
  if (field.type === "integer") return "an integer";
  return field.enum === undefined ? "a string" : `one of ${field.enum.join(", ")}`;
}

const searchSchema = objectSchema<SearchInput>(
  {
    query: { type: "string", description: "What to look for, in the user's words." },
    limit: { type: "integer", description: "The most results to return (1-50)." },
  },
  ["query"],
);

const rememberSchema = objectSchema<RememberInput>(
  {
    text: { type: "string", description: "The statement, self-contained (e.g. 'Prefers window seats')." },
    kind: { type: "string", enum: ["fact", "preference", "event"], description: "What kind of statement it is." },
    topics: { type: "array", items: { type: "string" }, description: "A few topics it is about." },
    entities: { type: "array", items: { type: "string" }, description: "People, places or things it names." },
    eventTime: { type: "string", description: "Events only: when it happened or will happen (ISO 8601)." },
  },
  ["text", "kind"],
);
