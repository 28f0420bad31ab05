/** @episodic/client: a typed TypeScript client for the Episodic gRPC memory service. */
export * from "./client.js";
export * from "./context.js";
export * from "./errors.js";

// The enums and message types of the main flow; every generated module is also importable
// as "@episodic/client/gen/<path of the .proto>.js".
export { MemoryConfig, RecallMode, PiiPolicy, type Agent } from "./gen/episodic/v1/agent.js";
export {
  Compaction,
  ContextSection,
  type ContextMessage,
  type ContextReport,
  type ModelCall,
} from "./gen/episodic/v1/context.js";
export type { BuildContextResponse } from "./gen/episodic/v1/context_service.js";
export { CheckIndexStatus, type CheckIndexResponse } from "./gen/episodic/v1/diagnostics_service.js";
export {
  CloseReason,
  DigestState,
  Episode,
  Episode_State,
  Role,
  type Message,
  type MessageInput,
  type ToolCall,
  type ToolResult,
} from "./gen/episodic/v1/episode.js";
export {
  MatchSignal,
  SearchMode,
  type EpisodeSnippet,
  type ErasureReceipt,
  type ExportManifest,
  type ExportUserResponse,
  type ImportUserRequest,
  type ImportUserResponse,
  type UserSummary,
  type WatchEpisodeResponse,
} from "./gen/episodic/v1/episode_service.js";
export type { AgentDeletionReceipt } from "./gen/episodic/v1/agent_service.js";
export {
  DocumentFormat,
  KnowledgeFate,
  KnowledgeOrigin,
  type Document,
  type DocumentChunk,
  type KnowledgeItem,
  type RenderedKnowledge,
} from "./gen/episodic/v1/knowledge.js";
export type { DocumentInput, KnowledgeHit } from "./gen/episodic/v1/knowledge_service.js";
export { MemoryKind, MemoryState, type Memory, type SessionData } from "./gen/episodic/v1/memory.js";
export {
  MemoryPlacement,
  MemoryOutcome,
  type MemoryHit,
  type MemoryInput,
  type MemoryTool,
} from "./gen/episodic/v1/memory_service.js";
export { status as GrpcStatus } from "@grpc/grpc-js";
