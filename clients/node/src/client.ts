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
  type GetAgentResponse,
  type ListAgentsResponse,
} from "./gen/episodic/v1/agent_service.js";
import {
  BuildContextRequest,
  type BuildContextResponse,
  ContextServiceClient,
  type GetModelCallResponse,
} from "./gen/episodic/v1/context_service.js";
import { CloseReason, type DeepPartial, type MessageInput, Role } from "./gen/episodic/v1/episode.js";
import {
  AddMessageRequest,
  type AddMessageResponse,
  AddMessagesRequest,
  type AddMessagesResponse,
  CloseEpisodeRequest,
  type CloseEpisodeResponse,
  EpisodeServiceClient,
  type GetEpisodeResponse,
  type ListMessagesResponse,
  OpenEpisodeRequest,
  type OpenEpisodeResponse,
  SearchEpisodesRequest,
  type SearchEpisodesResponse,
  SearchMode,
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
import type { MemoryKind } from "./gen/episodic/v1/memory.js";
import {
  CreateMemoriesRequest,
  type CreateMemoriesResponse,
  type MemoryInput,
  type MemoryPlacement,
  MemoryServiceClient,
  SearchMemoriesRequest,
  type SearchMemoriesResponse,
} from "./gen/episodic/v1/memory_service.js";

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

export interface CreateMemoriesOptions extends CallSettings {
  episodeId?: string;
  placement?: MemoryPlacement;
}

export interface SearchMemoriesOptions extends CallSettings {
  mode?: SearchModeLike;
  topK?: number;
  minScore?: number;
  kinds?: MemoryKind[];
  topics?: string[];
  entities?: string[];
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

  listAgents(options: PageOptions = {}): Promise<ListAgentsResponse> {
    const request = { pageSize: options.pageSize ?? 0, pageToken: options.pageToken ?? "" };
    return this.unary((md, opts, cb) => this.agents.listAgents(request, md, opts, cb), options.deadlineMs);
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

  // --- context --------------------------------------------------------------------------

  /**
   * The BuildContext stream, frame by frame: `for await (const frame of client.buildContext(id, {...}))`.
   * The deadline covers the whole stream; leaving the loop early cancels it.
   */
  async *buildContext(episodeId: string, options: BuildContextOptions = {}): AsyncGenerator<BuildContextResponse> {
    const { deadlineMs, ...rest } = options;
    const request = BuildContextRequest.fromPartial({ ...rest, episodeId });
    this.ensureOpen();
    const call = this.context.buildContext(request, this.metadata(), this.callOptions(deadlineMs));
    // The loop below sees the stream's errors; this listener keeps the CANCELLED that call.cancel()
    // raises after an early break from being an unhandled 'error' event.
    call.on("error", () => {});
    try {
      for await (const frame of call) {
        yield frame as BuildContextResponse;
      }
    } catch (error) {
      throw fromServiceError(error);
    } finally {
      call.cancel(); // a no-op once the stream has ended
    }
  }

  /** Runs BuildContext to its end: the whole messages (parts joined), the report and the rendered text. */
  renderContext(episodeId: string, options: BuildContextOptions = {}): Promise<BuiltContext> {
    return joinFrames(this.buildContext(episodeId, options));
  }

  getModelCall(modelCallId: string, settings: CallSettings = {}): Promise<GetModelCallResponse> {
    return this.unary((md, opts, cb) => this.context.getModelCall({ modelCallId }, md, opts, cb), settings.deadlineMs);
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
    const { deadlineMs, mode, ...rest } = options;
    const request = SearchMemoriesRequest.fromPartial({
      ...rest,
      agentId,
      userId,
      query,
      mode: toSearchMode(mode ?? SearchMode.SEARCH_MODE_HYBRID),
    });
    return this.unary((md, opts, cb) => this.memories.searchMemories(request, md, opts, cb), deadlineMs);
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

  // --- plumbing -------------------------------------------------------------------------

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
];

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
