/**
 * EpisodicClient: a thin typed wrapper over the generated grpc-js stubs.
 *
 * Every method sends its request with the client's API key (`authorization: Bearer <key>`)
 * and deadline, and resolves to the generated response message. A failed call rejects with
 * an `EpisodicError` subclass (see errors.ts), its details decoded from the rich status.
 */
import {
  Channel,
  type ChannelCredentials,
  type ChannelOptions,
  type ClientReadableStream,
  type ClientUnaryCall,
  type CallOptions,
  credentials as grpcCredentials,
  Metadata,
  type ServiceError,
} from "@grpc/grpc-js";

import { type BuiltContext, joinFrames } from "./context.js";
import { ClientClosedError, fromServiceError } from "./errors.js";
import type { Agent } from "./gen/episodic/v1/agent.js";
import {
  AgentServiceClient,
  CreateAgentRequest,
  type CreateAgentResponse,
  type DeleteAgentResponse,
  type GetAgentResponse,
  type ListAgentsResponse,
  UpdateAgentRequest,
  type UpdateAgentResponse,
} from "./gen/episodic/v1/agent_service.js";
import {
  BuildContextRequest,
  type BuildContextResponse,
  ContextServiceClient,
  type GetModelCallResponse,
  type ListModelCallsResponse,
  RecordModelReplyRequest,
  type RecordModelReplyResponse,
} from "./gen/episodic/v1/context_service.js";
import {
  type CheckIndexResponse,
  DiagnosticsServiceClient,
  type EchoResponse,
} from "./gen/episodic/v1/diagnostics_service.js";
import {
  CloseReason,
  type DeepPartial,
  Episode_State,
  type MessageInput,
  Role,
  type ToolCall,
} from "./gen/episodic/v1/episode.js";
import {
  AddMessageRequest,
  type AddMessageResponse,
  AddMessagesRequest,
  type AddMessagesResponse,
  CloseEpisodeRequest,
  type CloseEpisodeResponse,
  EpisodeServiceClient,
  type EraseUserResponse,
  FinalizeAssistantMessageRequest,
  type FinalizeAssistantMessageResponse,
  type GetEpisodeResponse,
  ListEpisodesRequest,
  type ListEpisodesResponse,
  type ListMessagesResponse,
  type ListUsersResponse,
  OpenEpisodeRequest,
  type OpenEpisodeResponse,
  type RetractMessageResponse,
  type UserSummary,
  type ExportUserResponse,
  ImportUserRequest,
  type ImportUserResponse,
  type PushAssistantDeltaResponse,
  SearchEpisodesRequest,
  type SearchEpisodesResponse,
  SearchMode,
  type WatchEpisodeResponse,
} from "./gen/episodic/v1/episode_service.js";
import { DocumentFormat, type KnowledgeItem } from "./gen/episodic/v1/knowledge.js";
import {
  CreateDocumentsRequest,
  type CreateDocumentsResponse,
  type DeleteDocumentResponse,
  type DocumentInput,
  type GetDocumentResponse,
  KnowledgeServiceClient,
  ListDocumentsRequest,
  type ListDocumentsResponse,
  SearchKnowledgeRequest,
  type SearchKnowledgeResponse,
  UpdateDocumentRequest,
  type UpdateDocumentResponse,
} from "./gen/episodic/v1/knowledge_service.js";
import { MemoryKind, MemoryState } from "./gen/episodic/v1/memory.js";
import {
  type CallMemoryToolResponse,
  CreateMemoriesRequest,
  type CreateMemoriesResponse,
  type DeleteMemoryResponse,
  type GetMemoryResponse,
  type GetMemoryToolsResponse,
  type GetSessionDataResponse,
  ListMemoriesRequest,
  type ListMemoriesResponse,
  type MemoryInput,
  type MemoryPlacement,
  MemoryServiceClient,
  SearchMemoriesRequest,
  type SearchMemoriesResponse,
  UpdateMemoryRequest,
  type UpdateMemoryResponse,
  UpdateSessionDataRequest,
  type UpdateSessionDataResponse,
} from "./gen/episodic/v1/memory_service.js";
import type { Duration } from "./gen/google/protobuf/duration.js";

export const DEFAULT_DEADLINE_MS = 10_000;

export interface EpisodicClientOptions {
  /** Sent as `authorization: Bearer <key>`; without one, only an --insecure-dev server answers. */
  apiKey?: string;
  /** TLS and the like; plaintext (`credentials.createInsecure()`) when absent. */
  credentials?: ChannelCredentials;
  /** Deadline of each call, in milliseconds (default 10 s); methods take `deadlineMs` to override it. */
  deadlineMs?: number;
  /** grpc-js channel options (e.g. "grpc.max_receive_message_length"). */
  channelOptions?: ChannelOptions;
}

export interface CallSettings {
  /** This call's deadline in milliseconds, instead of the client's. */
  deadlineMs?: number;
}

export type RoleLike = Role | "system" | "context" | "user" | "assistant" | "tool";
export type SearchModeLike = SearchMode | "recency" | "semantic" | "hybrid";
export type CloseReasonLike = CloseReason | "user_ended" | "agent_decision" | "idle_timeout";

export type AgentOptions = Omit<DeepPartial<Agent>, "agentId" | "createTime" | "updateTime"> & CallSettings;

/**
 * UpdateAgent: the agent's new values, and `updateMask` naming the fields to change
 * ("system_prompt", "memory_config.recall_top_k", "memory_config" for the whole
 * configuration). Without a mask the server changes the fields given with a non-default value.
 */
export type AgentUpdate = AgentOptions & { updateMask?: string[] };

export type EpisodeStateLike = Episode_State | "open" | "closed";
export type MemoryStateLike = MemoryState | "pending" | "promoted";
export type MemoryKindLike = MemoryKind | "fact" | "preference" | "event";

export interface ListEpisodesOptions extends PageOptions {
  /** Only episodes of this agent. */
  agentId?: string;
  /** Only episodes of this user. */
  userId?: string;
  /** Only episodes in this state (any state when absent). */
  state?: EpisodeStateLike;
}

export interface DeleteAgentOptions extends CallSettings {
  /**
   * Erase everything the agent holds first (each user's data as `eraseUser` with its
   * `agentId` erases it, and its documents); without it, an agent holding data is refused
   * with FailedPreconditionError (reason AGENT_HOLDS_DATA).
   */
  eraseData?: boolean;
}

export interface EraseUserOptions extends CallSettings {
  /** Only this agent's data of the user; every agent's when absent. */
  agentId?: string;
}

export interface WatchEpisodeOptions extends CallSettings {
  /** Replay the messages with a higher seq first (0: the whole log); absent: only what comes next. */
  afterSeq?: number;
}

export interface FinalizeAssistantMessageOptions extends CallSettings {
  /** The draft must have exactly this many characters (every push arrived). */
  length?: number;
  metadata?: Record<string, unknown>;
  /** Tool-call directives the reply ends with. */
  toolCalls?: DeepPartial<ToolCall>[];
}

export interface RecordModelReplyOptions extends CallSettings {
  /** Input (prompt) tokens the provider billed. */
  inputTokens?: number;
  /** Output (completion) tokens the provider billed. */
  outputTokens?: number;
  /** The request's `latency`: the time the model took to answer, in milliseconds. */
  latencyMs?: number;
  /** Seq of the assistant message the reply was logged as (0: not logged). */
  assistantMessageSeq?: number;
}

export interface ListMemoriesOptions extends PageOptions {
  /** Only memories in this state: "pending" (in an open episode) or "promoted". */
  state?: MemoryStateLike;
  /** Only memories held by (pending) or extracted from this episode. */
  episodeId?: string;
  /** Also superseded memories. */
  includeSuperseded?: boolean;
  /** Only memories with at least one of these topics. */
  topics?: string[];
}

/** UpdateMemory: the fields to set; each one given (not undefined) is named in the update mask. */
export interface MemoryUpdate extends CallSettings {
  text?: string;
  kind?: MemoryKindLike;
  topics?: string[];
  entities?: string[];
  /** null clears it. */
  eventTime?: Date | null;
  /** null removes the expiry. */
  expireTime?: Date | null;
  /** The client's own JSON object (at most 16 KiB), replaced whole. */
  metadata?: Record<string, unknown>;
}

export interface UpdateSessionDataOptions extends CallSettings {
  /** Apply only if the stored etag is this one (AbortedError otherwise). */
  etag?: string;
  /** The request's `ttl`: the data expires this many milliseconds from now (at least 1000). */
  ttlMs?: number;
}

export interface CheckIndexOptions extends CallSettings {
  /** Only this agent's vectors; the whole tenant when absent. */
  agentId?: string;
}

export interface OpenEpisodeOptions extends CallSettings {
  /** Client-chosen id; opening it again returns the same episode (`created` false). */
  episodeId?: string;
  metadata?: Record<string, unknown>;
  startTime?: Date;
}

export type MessageOptions = Omit<DeepPartial<MessageInput>, "role" | "content"> & CallSettings;
export type MessageInputLike = Omit<DeepPartial<MessageInput>, "role"> & { role: RoleLike };

export interface CloseEpisodeOptions extends CallSettings {
  reason?: CloseReasonLike;
  note?: string;
  endTime?: Date;
  /** Answer once the digest is READY or FAILED (within the deadline), so recall sees it at once. */
  waitForDigest?: boolean;
}

export interface SearchEpisodesOptions extends CallSettings {
  mode?: SearchModeLike;
  topK?: number;
  minScore?: number;
  endedAfter?: Date;
  endedBefore?: Date;
}

/** A piece of knowledge retrieved elsewhere, for `buildContext(id, { knowledge: [...] })`. */
export type KnowledgeItemLike = DeepPartial<KnowledgeItem>;

/**
 * BuildContext's fields besides the episode: `userMessage`, `memoryConfig` overrides, and
 * `knowledge` (items rendered in the "[Knowledge]" section; `report.knowledge` says what
 * became of each), among others.
 */
export type BuildContextOptions = Omit<DeepPartial<BuildContextRequest>, "episodeId" | "knowledge"> & {
  knowledge?: KnowledgeItemLike[];
} & CallSettings;

export interface ExportUserOptions extends CallSettings {
  /** Only this agent's data (default: every agent the key may use). */
  agentId?: string;
}

export interface CreateMemoriesOptions extends CallSettings {
  episodeId?: string;
  placement?: MemoryPlacement;
  /** Eager only: store each memory as given under its id (no merging into repeats, no superseding). */
  keepSeparate?: boolean;
}

export interface SearchMemoriesOptions extends CallSettings {
  mode?: SearchModeLike;
  topK?: number;
  minScore?: number;
  kinds?: MemoryKindLike[];
  topics?: string[];
  entities?: string[];
  /** Only memories created (events: whose event_time is) at or after this time. */
  after?: Date;
  /** Only memories created (events: whose event_time is) before this time. */
  before?: Date;
  /** Also the pending memories of this open episode of the user. */
  episodeId?: string;
  includeSuperseded?: boolean;
}

export interface PageOptions extends CallSettings {
  pageSize?: number;
  pageToken?: string;
}

export type DocumentFormatLike = DocumentFormat | "text" | "markdown";

/** A document to create: `documentId` and `text` are required; format defaults to markdown. */
export type DocumentInputLike = Omit<DeepPartial<DocumentInput>, "format"> & { format?: DocumentFormatLike };

export interface GetDocumentOptions extends CallSettings {
  /** Also return its chunks, in order. */
  includeChunks?: boolean;
}

export interface ListDocumentsOptions extends PageOptions {
  /** Only documents with every one of these metadata entries. */
  metadata?: Record<string, string>;
}

/** The fields to set: each one given (not undefined) is named in the update mask. */
export interface DocumentUpdate extends CallSettings {
  text?: string;
  format?: DocumentFormatLike;
  title?: string;
  uri?: string;
  /** Replaces the whole map. */
  metadata?: Record<string, string>;
  /** A new expiry; null removes it (the document never expires). */
  expireTime?: Date | null;
}

export interface SearchKnowledgeOptions extends CallSettings {
  mode?: SearchModeLike;
  topK?: number;
  minScore?: number;
  metadata?: Record<string, string>;
  updatedAfter?: Date;
  updatedBefore?: Date;
}

type UnaryCallback<Res> = (error: ServiceError | null, response: Res) => void;
type UnaryInvoker<Res> = (
  metadata: Metadata,
  options: Partial<CallOptions>,
  callback: UnaryCallback<Res>,
) => ClientUnaryCall;

export class EpisodicClient {
  private readonly channel: Channel;
  private readonly deadlineMs: number;
  private readonly apiKey: string | undefined;
  private readonly agents: AgentServiceClient;
  private readonly episodes: EpisodeServiceClient;
  private readonly context: ContextServiceClient;
  private readonly memories: MemoryServiceClient;
  private readonly knowledge: KnowledgeServiceClient;
  private readonly diagnostics: DiagnosticsServiceClient;
  private closed = false;

  /** `address` is host:port, or any grpc-js target (`dns:///name:50051`, `ipv4:a:p,b:p`). */
  constructor(address: string, options: EpisodicClientOptions = {}) {
    const creds = options.credentials ?? grpcCredentials.createInsecure();
    this.channel = new Channel(address, creds, options.channelOptions ?? {});
    this.deadlineMs = options.deadlineMs ?? DEFAULT_DEADLINE_MS;
    this.apiKey = options.apiKey;
    const shared = { channelOverride: this.channel };
    this.agents = new AgentServiceClient(address, creds, shared);
    this.episodes = new EpisodeServiceClient(address, creds, shared);
    this.context = new ContextServiceClient(address, creds, shared);
    this.memories = new MemoryServiceClient(address, creds, shared);
    this.knowledge = new KnowledgeServiceClient(address, creds, shared);
    this.diagnostics = new DiagnosticsServiceClient(address, creds, shared);
  }

  /** Closes the channel; later calls reject with ClientClosedError. Safe to call twice. */
  close(): void {
    if (!this.closed) {
      this.closed = true;
      this.channel.close();
    }
  }

  get isClosed(): boolean {
    return this.closed;
  }

  // --- agents ---------------------------------------------------------------------------

  createAgent(agentId: string, options: AgentOptions = {}): Promise<CreateAgentResponse> {
    const { deadlineMs, ...agent } = options;
    const request = CreateAgentRequest.fromPartial({ agent: { ...agent, agentId } });
    return this.unary((md, opts, cb) => this.agents.createAgent(request, md, opts, cb), deadlineMs);
  }

  getAgent(agentId: string, settings: CallSettings = {}): Promise<GetAgentResponse> {
    return this.unary((md, opts, cb) => this.agents.getAgent({ agentId }, md, opts, cb), settings.deadlineMs);
  }

  /** Changes the fields named by `updateMask` (or, without one, those given with a non-default value). */
  updateAgent(agentId: string, update: AgentUpdate): Promise<UpdateAgentResponse> {
    const { deadlineMs, updateMask, ...agent } = update;
    const request = UpdateAgentRequest.fromPartial({ agent: { ...agent, agentId }, updateMask: updateMask ?? [] });
    return this.unary((md, opts, cb) => this.agents.updateAgent(request, md, opts, cb), deadlineMs);
  }

  listAgents(options: PageOptions = {}): Promise<ListAgentsResponse> {
    const request = { pageSize: options.pageSize ?? 0, pageToken: options.pageToken ?? "" };
    return this.unary((md, opts, cb) => this.agents.listAgents(request, md, opts, cb), options.deadlineMs);
  }

  /** Deletes the agent; the receipt counts what was erased with it (see DeleteAgentOptions). */
  deleteAgent(agentId: string, options: DeleteAgentOptions = {}): Promise<DeleteAgentResponse> {
    const request = { agentId, eraseData: options.eraseData ?? false };
    return this.unary((md, opts, cb) => this.agents.deleteAgent(request, md, opts, cb), options.deadlineMs);
  }

  // --- episodes -------------------------------------------------------------------------

  openEpisode(agentId: string, userId: string, options: OpenEpisodeOptions = {}): Promise<OpenEpisodeResponse> {
    const { deadlineMs, ...rest } = options;
    const request = OpenEpisodeRequest.fromPartial({ ...rest, agentId, userId });
    return this.unary((md, opts, cb) => this.episodes.openEpisode(request, md, opts, cb), deadlineMs);
  }

  getEpisode(episodeId: string, settings: CallSettings = {}): Promise<GetEpisodeResponse> {
    return this.unary((md, opts, cb) => this.episodes.getEpisode({ episodeId }, md, opts, cb), settings.deadlineMs);
  }

  closeEpisode(episodeId: string, options: CloseEpisodeOptions = {}): Promise<CloseEpisodeResponse> {
    const { deadlineMs, reason, ...rest } = options;
    const request = CloseEpisodeRequest.fromPartial({
      ...rest,
      episodeId,
      reason: toCloseReason(reason ?? CloseReason.CLOSE_REASON_USER_ENDED),
    });
    return this.unary((md, opts, cb) => this.episodes.closeEpisode(request, md, opts, cb), deadlineMs);
  }

  /** One page of episodes, newest first, filtered by agent, user and state when given. */
  listEpisodes(options: ListEpisodesOptions = {}): Promise<ListEpisodesResponse> {
    const { deadlineMs, state, ...rest } = options;
    const request = ListEpisodesRequest.fromPartial({ ...rest, state: toEpisodeState(state) });
    return this.unary((md, opts, cb) => this.episodes.listEpisodes(request, md, opts, cb), deadlineMs);
  }

  /**
   * One page of the agent's users (those it holds episodes or memories of), by user id, each
   * with its episode, open-episode and memory counts and its last activity.
   */
  listUsers(agentId: string, options: PageOptions = {}): Promise<ListUsersResponse> {
    const request = { agentId, pageSize: options.pageSize ?? 0, pageToken: options.pageToken ?? "" };
    return this.unary((md, opts, cb) => this.episodes.listUsers(request, md, opts, cb), options.deadlineMs);
  }

  /** Every user of the agent, by user id, fetching pages of `pageSize` as needed. */
  async *iterUsers(agentId: string, options: Omit<PageOptions, "pageToken"> = {}): AsyncGenerator<UserSummary> {
    let pageToken = "";
    do {
      const page = await this.listUsers(agentId, { ...options, pageToken });
      yield* page.users;
      pageToken = page.nextPageToken;
    } while (pageToken);
  }

  /**
   * Erases every row and vector of the user (of one agent with `agentId`): episodes, messages,
   * model calls, memories, session data. Idempotent; the receipt counts what was removed.
   */
  eraseUser(userId: string, options: EraseUserOptions = {}): Promise<EraseUserResponse> {
    const request = { userId, agentId: options.agentId ?? "" };
    return this.unary((md, opts, cb) => this.episodes.eraseUser(request, md, opts, cb), options.deadlineMs);
  }

  searchEpisodes(
    agentId: string,
    userId: string,
    query: string,
    options: SearchEpisodesOptions = {},
  ): Promise<SearchEpisodesResponse> {
    const { deadlineMs, mode, ...rest } = options;
    const request = SearchEpisodesRequest.fromPartial({
      ...rest,
      agentId,
      userId,
      query,
      mode: toSearchMode(mode ?? SearchMode.SEARCH_MODE_HYBRID),
    });
    return this.unary((md, opts, cb) => this.episodes.searchEpisodes(request, md, opts, cb), deadlineMs);
  }

  // --- messages -------------------------------------------------------------------------

  addMessage(
    episodeId: string,
    role: RoleLike,
    content: string,
    options: MessageOptions = {},
  ): Promise<AddMessageResponse> {
    const { deadlineMs, ...rest } = options;
    const request = AddMessageRequest.fromPartial({ episodeId, message: { ...rest, role: toRole(role), content } });
    return this.unary((md, opts, cb) => this.episodes.addMessage(request, md, opts, cb), deadlineMs);
  }

  /** Appends several messages atomically, in order. */
  addMessages(
    episodeId: string,
    messages: MessageInputLike[],
    settings: CallSettings = {},
  ): Promise<AddMessagesResponse> {
    const request = AddMessagesRequest.fromPartial({
      episodeId,
      messages: messages.map((m) => ({ ...m, role: toRole(m.role) })),
    });
    return this.unary((md, opts, cb) => this.episodes.addMessages(request, md, opts, cb), settings.deadlineMs);
  }

  /** One page of the log, newest (highest seq) first. */
  listMessages(episodeId: string, options: PageOptions = {}): Promise<ListMessagesResponse> {
    const request = { episodeId, pageSize: options.pageSize ?? 0, pageToken: options.pageToken ?? "" };
    return this.unary((md, opts, cb) => this.episodes.listMessages(request, md, opts, cb), options.deadlineMs);
  }

  // --- live watching --------------------------------------------------------------------

  /**
   * The episode's events as they happen, `for await (const event of client.watchEpisode(id))`:
   * `messageAppended`, `draftText`, `draftFinalized`, `draftDiscarded`, `heartbeat`, and
   * `episodeClosed` last. No deadline unless `deadlineMs` is given; leaving the loop early
   * cancels it. A watcher that fell behind gets ResourceExhaustedError: watch again with `afterSeq`.
   */
  async *watchEpisode(episodeId: string, options: WatchEpisodeOptions = {}): AsyncGenerator<WatchEpisodeResponse> {
    const request = { episodeId, afterSeq: options.afterSeq };
    const callOptions = options.deadlineMs === undefined ? {} : this.callOptions(options.deadlineMs);
    yield* this.stream(() => this.episodes.watchEpisode(request, this.metadata(), callOptions));
  }

  /**
   * Everything held about the user, streamed: each part's records (JSON lines), then the
   * manifest (parts, counts, sha256) last. No deadline unless `deadlineMs` is given.
   */
  async *exportUser(userId: string, options: ExportUserOptions = {}): AsyncGenerator<ExportUserResponse> {
    const request = { userId, agentId: options.agentId ?? "" };
    const callOptions = options.deadlineMs === undefined ? {} : this.callOptions(options.deadlineMs);
    yield* this.stream(() => this.episodes.exportUser(request, this.metadata(), callOptions));
  }

  /**
   * Loads an export: the first request carries the manifest (and optionally another `userId`),
   * the rest each part's records in the manifest's order, as `exportUser` produced them.
   */
  importUser(
    requests: Iterable<DeepPartial<ImportUserRequest>> | AsyncIterable<DeepPartial<ImportUserRequest>>,
    settings: CallSettings = {},
  ): Promise<ImportUserResponse> {
    return new Promise<ImportUserResponse>((resolve, reject) => {
      try {
        this.ensureOpen();
        const callOptions = settings.deadlineMs === undefined ? {} : this.callOptions(settings.deadlineMs);
        const call = this.episodes.importUser(this.metadata(), callOptions, (error, response) =>
          error ? reject(fromServiceError(error)) : resolve(response),
        );
        void (async () => {
          for await (const request of requests) {
            if (!call.write(ImportUserRequest.fromPartial(request))) {
              await new Promise((drained) => call.once("drain", drained));
            }
          }
          call.end();
        })().catch((error: unknown) => {
          call.cancel();
          reject(fromServiceError(error));
        });
      } catch (error) {
        reject(fromServiceError(error));
      }
    });
  }

  /** Adds `text` to the reply in progress `draftId`; `offset`: the characters already pushed. */
  pushAssistantDelta(
    episodeId: string,
    draftId: string,
    offset: number,
    text: string,
    settings: CallSettings = {},
  ): Promise<PushAssistantDeltaResponse> {
    const request = { episodeId, draftId, offset, text };
    return this.unary((md, opts, cb) => this.episodes.pushAssistantDelta(request, md, opts, cb), settings.deadlineMs);
  }

  /** Writes the draft's text to the log as an assistant message (client_message_id = draftId). */
  finalizeAssistantMessage(
    episodeId: string,
    draftId: string,
    options: FinalizeAssistantMessageOptions = {},
  ): Promise<FinalizeAssistantMessageResponse> {
    const { deadlineMs, ...rest } = options;
    const request = FinalizeAssistantMessageRequest.fromPartial({ ...rest, episodeId, draftId });
    return this.unary((md, opts, cb) => this.episodes.finalizeAssistantMessage(request, md, opts, cb), deadlineMs);
  }

  /**
   * Takes message `seq` of an open episode back: it stays in the log (with `retractTime`) and
   * leaves every projection. FailedPreconditionError once a summary covers it, or for an
   * assistant message whose tool results are not retracted.
   */
  retractMessage(episodeId: string, seq: number, settings: CallSettings = {}): Promise<RetractMessageResponse> {
    const request = { episodeId, seq };
    return this.unary((md, opts, cb) => this.episodes.retractMessage(request, md, opts, cb), settings.deadlineMs);
  }

  // --- context --------------------------------------------------------------------------

  /**
   * The BuildContext stream, frame by frame: `for await (const frame of client.buildContext(id, {...}))`.
   * The deadline covers the whole stream; leaving the loop early cancels it.
   */
  async *buildContext(episodeId: string, options: BuildContextOptions = {}): AsyncGenerator<BuildContextResponse> {
    const { deadlineMs, ...rest } = options;
    const request = BuildContextRequest.fromPartial({ ...rest, episodeId });
    yield* this.stream(() => this.context.buildContext(request, this.metadata(), this.callOptions(deadlineMs)));
  }

  /** Runs BuildContext to its end: the whole messages (parts joined), the report and the rendered text. */
  renderContext(episodeId: string, options: BuildContextOptions = {}): Promise<BuiltContext> {
    return joinFrames(this.buildContext(episodeId, options));
  }

  getModelCall(modelCallId: string, settings: CallSettings = {}): Promise<GetModelCallResponse> {
    return this.unary((md, opts, cb) => this.context.getModelCall({ modelCallId }, md, opts, cb), settings.deadlineMs);
  }

  /** One page of the episode's model calls, newest first. */
  listModelCalls(episodeId: string, options: PageOptions = {}): Promise<ListModelCallsResponse> {
    const request = { episodeId, pageSize: options.pageSize ?? 0, pageToken: options.pageToken ?? "" };
    return this.unary((md, opts, cb) => this.context.listModelCalls(request, md, opts, cb), options.deadlineMs);
  }

  /** Attaches the model's reply (usage, latency, assistant message) to a model call. */
  recordModelReply(modelCallId: string, options: RecordModelReplyOptions = {}): Promise<RecordModelReplyResponse> {
    const { deadlineMs, latencyMs, ...rest } = options;
    const request = RecordModelReplyRequest.fromPartial({
      ...rest,
      modelCallId,
      latency: latencyMs === undefined ? undefined : toDuration(latencyMs),
    });
    return this.unary((md, opts, cb) => this.context.recordModelReply(request, md, opts, cb), deadlineMs);
  }

  // --- memories -------------------------------------------------------------------------

  createMemories(
    agentId: string,
    userId: string,
    memories: DeepPartial<MemoryInput>[],
    options: CreateMemoriesOptions = {},
  ): Promise<CreateMemoriesResponse> {
    const { deadlineMs, ...rest } = options;
    const request = CreateMemoriesRequest.fromPartial({ ...rest, agentId, userId, memories });
    return this.unary((md, opts, cb) => this.memories.createMemories(request, md, opts, cb), deadlineMs);
  }

  searchMemories(
    agentId: string,
    userId: string,
    query: string,
    options: SearchMemoriesOptions = {},
  ): Promise<SearchMemoriesResponse> {
    const { deadlineMs, mode, kinds, ...rest } = options;
    const request = SearchMemoriesRequest.fromPartial({
      ...rest,
      agentId,
      userId,
      query,
      mode: toSearchMode(mode ?? SearchMode.SEARCH_MODE_HYBRID),
      kinds: kinds?.map(toMemoryKind),
    });
    return this.unary((md, opts, cb) => this.memories.searchMemories(request, md, opts, cb), deadlineMs);
  }

  getMemory(memoryId: string, settings: CallSettings = {}): Promise<GetMemoryResponse> {
    return this.unary((md, opts, cb) => this.memories.getMemory({ memoryId }, md, opts, cb), settings.deadlineMs);
  }

  /** One page of the user's memories, newest first (superseded ones only with `includeSuperseded`). */
  listMemories(agentId: string, userId: string, options: ListMemoriesOptions = {}): Promise<ListMemoriesResponse> {
    const { deadlineMs, state, ...rest } = options;
    const request = ListMemoriesRequest.fromPartial({ ...rest, agentId, userId, state: toMemoryState(state) });
    return this.unary((md, opts, cb) => this.memories.listMemories(request, md, opts, cb), deadlineMs);
  }

  /** Sets the fields given (text, kind, topics, entities, eventTime, expireTime, metadata). */
  updateMemory(memoryId: string, update: MemoryUpdate): Promise<UpdateMemoryResponse> {
    const { deadlineMs, ...fields } = update;
    const updateMask = MEMORY_FIELDS.filter(([name]) => fields[name] !== undefined).map(([, path]) => path);
    const request = UpdateMemoryRequest.fromPartial({
      memory: {
        ...fields,
        memoryId,
        kind: fields.kind === undefined ? undefined : toMemoryKind(fields.kind),
        eventTime: fields.eventTime ?? undefined,
        expireTime: fields.expireTime ?? undefined,
      },
      updateMask,
    });
    return this.unary((md, opts, cb) => this.memories.updateMemory(request, md, opts, cb), deadlineMs);
  }

  /** Deletes the memory and its vector; resolves to the memory as it was. */
  deleteMemory(memoryId: string, settings: CallSettings = {}): Promise<DeleteMemoryResponse> {
    return this.unary((md, opts, cb) => this.memories.deleteMemory({ memoryId }, md, opts, cb), settings.deadlineMs);
  }

  getSessionData(episodeId: string, settings: CallSettings = {}): Promise<GetSessionDataResponse> {
    const request = { episodeId };
    return this.unary((md, opts, cb) => this.memories.getSessionData(request, md, opts, cb), settings.deadlineMs);
  }

  /** Merges `data` into the episode's session data (JSON merge patch: a null value removes its key). */
  updateSessionData(
    episodeId: string,
    data: Record<string, unknown>,
    options: UpdateSessionDataOptions = {},
  ): Promise<UpdateSessionDataResponse> {
    const { deadlineMs, ttlMs, ...rest } = options;
    const request = UpdateSessionDataRequest.fromPartial({
      ...rest,
      episodeId,
      data,
      ttl: ttlMs === undefined ? undefined : toDuration(ttlMs),
    });
    return this.unary((md, opts, cb) => this.memories.updateSessionData(request, md, opts, cb), deadlineMs);
  }

  /** The memory tools in OpenAI function-calling shape (`tool.definition` is the whole tool). */
  getMemoryTools(settings: CallSettings = {}): Promise<GetMemoryToolsResponse> {
    return this.unary((md, opts, cb) => this.memories.getMemoryTools({}, md, opts, cb), settings.deadlineMs);
  }

  /**
   * Runs one memory tool call of the model in the episode; `args` as the model wrote them
   * (JSON text, or an object to serialize). `result` is the JSON to hand back to the model.
   */
  callMemoryTool(
    episodeId: string,
    name: string,
    args: string | Record<string, unknown>,
    settings: CallSettings = {},
  ): Promise<CallMemoryToolResponse> {
    const request = { episodeId, name, arguments: typeof args === "string" ? args : JSON.stringify(args) };
    return this.unary((md, opts, cb) => this.memories.callMemoryTool(request, md, opts, cb), settings.deadlineMs);
  }

  // --- knowledge ------------------------------------------------------------------------

  /** Creates 1-100 documents of the agent, all or none; a key that may write knowledge is needed. */
  createDocuments(
    agentId: string,
    documents: DocumentInputLike[],
    settings: CallSettings = {},
  ): Promise<CreateDocumentsResponse> {
    const request = CreateDocumentsRequest.fromPartial({
      agentId,
      documents: documents.map((d) => ({ ...d, format: toDocumentFormat(d.format) })),
    });
    return this.unary((md, opts, cb) => this.knowledge.createDocuments(request, md, opts, cb), settings.deadlineMs);
  }

  /** One document with its text (and its chunks with `includeChunks`). */
  getDocument(agentId: string, documentId: string, options: GetDocumentOptions = {}): Promise<GetDocumentResponse> {
    const request = { agentId, documentId, includeChunks: options.includeChunks ?? false };
    return this.unary((md, opts, cb) => this.knowledge.getDocument(request, md, opts, cb), options.deadlineMs);
  }

  /** One page of the agent's documents, by document id, without their text. */
  listDocuments(agentId: string, options: ListDocumentsOptions = {}): Promise<ListDocumentsResponse> {
    const { deadlineMs, ...rest } = options;
    const request = ListDocumentsRequest.fromPartial({ ...rest, agentId });
    return this.unary((md, opts, cb) => this.knowledge.listDocuments(request, md, opts, cb), deadlineMs);
  }

  /** Sets the fields given; a new text or format is cut into chunks and embedded again. */
  updateDocument(agentId: string, documentId: string, update: DocumentUpdate): Promise<UpdateDocumentResponse> {
    const { deadlineMs, ...fields } = update;
    const updateMask = DOCUMENT_FIELDS.filter(([name]) => fields[name] !== undefined).map(([, path]) => path);
    const request = UpdateDocumentRequest.fromPartial({
      document: {
        ...fields,
        agentId,
        documentId,
        format: toDocumentFormat(fields.format),
        expireTime: fields.expireTime ?? undefined,
      },
      updateMask,
    });
    return this.unary((md, opts, cb) => this.knowledge.updateDocument(request, md, opts, cb), deadlineMs);
  }

  /** Deletes the document with every chunk of it. */
  deleteDocument(agentId: string, documentId: string, settings: CallSettings = {}): Promise<DeleteDocumentResponse> {
    const request = { agentId, documentId };
    return this.unary((md, opts, cb) => this.knowledge.deleteDocument(request, md, opts, cb), settings.deadlineMs);
  }

  /** Chunks of the agent's documents, best first. */
  searchKnowledge(
    agentId: string,
    query: string,
    options: SearchKnowledgeOptions = {},
  ): Promise<SearchKnowledgeResponse> {
    const { deadlineMs, mode, ...rest } = options;
    const request = SearchKnowledgeRequest.fromPartial({
      ...rest,
      agentId,
      query,
      mode: toSearchMode(mode ?? SearchMode.SEARCH_MODE_HYBRID),
    });
    return this.unary((md, opts, cb) => this.knowledge.searchKnowledge(request, md, opts, cb), deadlineMs);
  }

  // --- diagnostics ----------------------------------------------------------------------

  /** Sends `payload` (at most 64 KiB; a string is sent as UTF-8) and resolves to it unchanged. */
  echo(payload: Uint8Array | string = new Uint8Array(), settings: CallSettings = {}): Promise<EchoResponse> {
    const request = { payload: Buffer.from(payload) };
    return this.unary((md, opts, cb) => this.diagnostics.echo(request, md, opts, cb), settings.deadlineMs);
  }

  /** Compares the in-memory vector indexes with SQL for the tenant (or one agent): an operator's tool. */
  checkIndex(options: CheckIndexOptions = {}): Promise<CheckIndexResponse> {
    const request = { agentId: options.agentId ?? "" };
    return this.unary((md, opts, cb) => this.diagnostics.checkIndex(request, md, opts, cb), options.deadlineMs);
  }

  // --- plumbing -------------------------------------------------------------------------

  /** A server stream as an async generator: errors mapped, the call cancelled when the loop is left. */
  private async *stream<Res>(start: () => ClientReadableStream<Res>): AsyncGenerator<Res> {
    this.ensureOpen();
    const call = start();
    // The loop below sees the stream's errors; this listener keeps the CANCELLED that call.cancel()
    // raises after an early break from being an unhandled 'error' event.
    call.on("error", () => {});
    try {
      for await (const item of call) {
        yield item as Res;
      }
    } catch (error) {
      throw fromServiceError(error);
    } finally {
      call.cancel(); // a no-op once the stream has ended
    }
  }

  private unary<Res>(invoke: UnaryInvoker<Res>, deadlineMs: number | undefined): Promise<Res> {
    return new Promise<Res>((resolve, reject) => {
      try {
        this.ensureOpen();
        invoke(this.metadata(), this.callOptions(deadlineMs), (error, response) => {
          if (error) {
            reject(fromServiceError(error));
          } else {
            resolve(response);
          }
        });
      } catch (error) {
        reject(fromServiceError(error));
      }
    });
  }

  private ensureOpen(): void {
    if (this.closed) {
      throw new ClientClosedError();
    }
  }

  private metadata(): Metadata {
    const metadata = new Metadata();
    if (this.apiKey) {
      metadata.set("authorization", `Bearer ${this.apiKey}`);
    }
    return metadata;
  }

  private callOptions(deadlineMs: number | undefined): Partial<CallOptions> {
    return { deadline: Date.now() + (deadlineMs ?? this.deadlineMs) };
  }
}

const ROLES: Record<Exclude<RoleLike, Role>, Role> = {
  system: Role.ROLE_SYSTEM,
  context: Role.ROLE_CONTEXT,
  user: Role.ROLE_USER,
  assistant: Role.ROLE_ASSISTANT,
  tool: Role.ROLE_TOOL,
};

const SEARCH_MODES: Record<Exclude<SearchModeLike, SearchMode>, SearchMode> = {
  recency: SearchMode.SEARCH_MODE_RECENCY,
  semantic: SearchMode.SEARCH_MODE_SEMANTIC,
  hybrid: SearchMode.SEARCH_MODE_HYBRID,
};

const CLOSE_REASONS: Record<Exclude<CloseReasonLike, CloseReason>, CloseReason> = {
  user_ended: CloseReason.CLOSE_REASON_USER_ENDED,
  agent_decision: CloseReason.CLOSE_REASON_AGENT_DECISION,
  idle_timeout: CloseReason.CLOSE_REASON_IDLE_TIMEOUT,
};

const DOCUMENT_FORMATS: Record<Exclude<DocumentFormatLike, DocumentFormat>, DocumentFormat> = {
  text: DocumentFormat.DOCUMENT_FORMAT_TEXT,
  markdown: DocumentFormat.DOCUMENT_FORMAT_MARKDOWN,
};

// The update mask's paths of DocumentUpdate's fields, in the order of the proto.
const DOCUMENT_FIELDS: ReadonlyArray<readonly [keyof Omit<DocumentUpdate, "deadlineMs">, string]> = [
  ["text", "text"],
  ["format", "format"],
  ["title", "title"],
  ["uri", "uri"],
  ["metadata", "metadata"],
  ["expireTime", "expire_time"],
  ["metadata", "metadata"],
];

const EPISODE_STATES: Record<Exclude<EpisodeStateLike, Episode_State>, Episode_State> = {
  open: Episode_State.STATE_OPEN,
  closed: Episode_State.STATE_CLOSED,
};

const MEMORY_STATES: Record<Exclude<MemoryStateLike, MemoryState>, MemoryState> = {
  pending: MemoryState.MEMORY_STATE_PENDING,
  promoted: MemoryState.MEMORY_STATE_PROMOTED,
};

const MEMORY_KINDS: Record<Exclude<MemoryKindLike, MemoryKind>, MemoryKind> = {
  fact: MemoryKind.MEMORY_KIND_FACT,
  preference: MemoryKind.MEMORY_KIND_PREFERENCE,
  event: MemoryKind.MEMORY_KIND_EVENT,
};

// The update mask's paths of MemoryUpdate's fields, in the order of the proto.
const MEMORY_FIELDS: ReadonlyArray<readonly [keyof Omit<MemoryUpdate, "deadlineMs">, string]> = [
  ["text", "text"],
  ["kind", "kind"],
  ["topics", "topics"],
  ["entities", "entities"],
  ["eventTime", "event_time"],
  ["expireTime", "expire_time"],
];

// A filter left out is UNSPECIFIED (any); an unknown name is sent as -1, which the server refuses.
function toEpisodeState(state: EpisodeStateLike | undefined): Episode_State {
  if (state === undefined || typeof state === "number") {
    return state ?? Episode_State.STATE_UNSPECIFIED;
  }
  return EPISODE_STATES[state] ?? Episode_State.UNRECOGNIZED;
}

function toMemoryState(state: MemoryStateLike | undefined): MemoryState {
  if (state === undefined || typeof state === "number") {
    return state ?? MemoryState.MEMORY_STATE_UNSPECIFIED;
  }
  return MEMORY_STATES[state] ?? MemoryState.UNRECOGNIZED;
}

function toMemoryKind(kind: MemoryKindLike): MemoryKind {
  return typeof kind === "number" ? kind : (MEMORY_KINDS[kind] ?? MemoryKind.MEMORY_KIND_UNSPECIFIED);
}

/** Milliseconds as a google.protobuf.Duration. */
function toDuration(ms: number): Duration {
  const seconds = Math.trunc(ms / 1000);
  return { seconds, nanos: Math.round((ms - seconds * 1000) * 1_000_000) };
}

// An unknown name becomes UNSPECIFIED (0), which the server refuses naming the field.
function toRole(role: RoleLike): Role {
  return typeof role === "number" ? role : (ROLES[role] ?? Role.ROLE_UNSPECIFIED);
}

function toSearchMode(mode: SearchModeLike): SearchMode {
  return typeof mode === "number" ? mode : (SEARCH_MODES[mode] ?? SearchMode.SEARCH_MODE_UNSPECIFIED);
}

/**
 * Undefined stays unset (the server reads it as markdown). Unset is valid for a format, so an
 * unknown name is sent as -1, which the server refuses naming the field.
 */
function toDocumentFormat(format: DocumentFormatLike | undefined): DocumentFormat | undefined {
  if (format === undefined || typeof format === "number") {
    return format;
  }
  return DOCUMENT_FORMATS[format] ?? (-1 as DocumentFormat);
}

function toCloseReason(reason: CloseReasonLike): CloseReason {
  return typeof reason === "number" ? reason : (CLOSE_REASONS[reason] ?? CloseReason.CLOSE_REASON_UNSPECIFIED);
}
