/**
 * Every RPC of the contract is reachable from EpisodicClient, with the same option coverage.
 *
 * At run time: the generated service definitions (src/gen/episodic/v1/*_service.ts) are
 * walked, each RPC must have a client method of its lowerCamel name, and the RPCs they
 * define must be exactly those of proto/episodic/v1/*_service.proto (stale stubs fail too).
 * At compile time (tsc, before the tests run): every field of each request is a positional
 * argument or an option of its method, so a field added to the contract fails the build
 * until the client takes it.
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { describe, it } from "node:test";
import { fileURLToPath, pathToFileURL } from "node:url";

import { EpisodicClient } from "../src/index.js";
import type { Agent } from "../src/gen/episodic/v1/agent.js";
import type { DeleteAgentRequest, ListAgentsRequest } from "../src/gen/episodic/v1/agent_service.js";
import type {
  BuildContextRequest,
  ListModelCallsRequest,
  RecordModelReplyRequest,
} from "../src/gen/episodic/v1/context_service.js";
import type { CheckIndexRequest } from "../src/gen/episodic/v1/diagnostics_service.js";
import type { MessageInput } from "../src/gen/episodic/v1/episode.js";
import type {
  CloseEpisodeRequest,
  EraseUserRequest,
  ExportUserRequest,
  RetractMessageRequest,
  FinalizeAssistantMessageRequest,
  ListEpisodesRequest,
  ListMessagesRequest,
  ListUsersRequest,
  OpenEpisodeRequest,
  PushAssistantDeltaRequest,
  SearchEpisodesRequest,
  WatchEpisodeRequest,
} from "../src/gen/episodic/v1/episode_service.js";
import type { Document } from "../src/gen/episodic/v1/knowledge.js";
import type {
  GetDocumentRequest,
  ListDocumentsRequest,
  SearchKnowledgeRequest,
} from "../src/gen/episodic/v1/knowledge_service.js";
import type { Memory } from "../src/gen/episodic/v1/memory.js";
import type {
  CallMemoryToolRequest,
  CreateMemoriesRequest,
  ListMemoriesRequest,
  SearchMemoriesRequest,
  UpdateSessionDataRequest,
} from "../src/gen/episodic/v1/memory_service.js";

const HERE = dirname(fileURLToPath(import.meta.url)); // dist/test
const GEN_DIR = resolve(HERE, "../src/gen/episodic/v1");
const PROTO_DIR = resolve(HERE, "../../../../proto/episodic/v1");

interface MethodDefinition {
  path: string;
  requestStream: boolean;
  responseStream: boolean;
}

/** "/episodic.v1.EpisodeService/EraseUser" -> ["EpisodeService", "EraseUser"]. */
function splitPath(path: string): [string, string] {
  const match = /^\/episodic\.v1\.(\w+)\/(\w+)$/.exec(path);
  assert.ok(match, `unexpected method path ${path}`);
  return [match[1], match[2]];
}

function lowerCamel(name: string): string {
  return name[0].toLowerCase() + name.slice(1);
}

/** Every RPC of the generated service definitions, as "Service/Rpc". */
async function generatedRpcs(): Promise<string[]> {
  const rpcs: string[] = [];
  for (const file of readdirSync(GEN_DIR).filter((f) => f.endsWith("_service.js"))) {
    const module = (await import(pathToFileURL(join(GEN_DIR, file)).href)) as Record<string, unknown>;
    for (const [name, value] of Object.entries(module)) {
      // ts-proto's grpc-js output: `export const FooServiceService = { rpcName: { path, ... } }`.
      if (!name.endsWith("Service") || typeof value !== "object" || value === null) {
        continue;
      }
      for (const definition of Object.values(value as Record<string, MethodDefinition>)) {
        if (typeof definition?.path === "string") {
          rpcs.push(splitPath(definition.path).join("/"));
        }
      }
    }
  }
  return rpcs.sort();
}

/** Every RPC declared in proto/episodic/v1/*_service.proto, as "Service/Rpc". */
function declaredRpcs(): string[] {
  const rpcs: string[] = [];
  for (const file of readdirSync(PROTO_DIR).filter((f) => f.endsWith("_service.proto"))) {
    let service = "";
    for (const line of readFileSync(join(PROTO_DIR, file), "utf8").split("\n")) {
      service = /^service (\w+)/.exec(line)?.[1] ?? service;
      const rpc = /^\s*rpc (\w+)\s*\(/.exec(line)?.[1];
      if (rpc) {
        rpcs.push(`${service}/${rpc}`);
      }
    }
  }
  return rpcs.sort();
}

describe("contract coverage", () => {
  it("has a client method, named in lowerCamel, for every RPC of every service", async () => {
    const rpcs = await generatedRpcs();
    assert.ok(rpcs.length >= 30, `only ${rpcs.length} RPCs found in ${GEN_DIR}`);
    const prototype = EpisodicClient.prototype as unknown as Record<string, unknown>;
    const missing = rpcs.filter((rpc) => typeof prototype[lowerCamel(rpc.split("/")[1])] !== "function");
    assert.deepEqual(missing, [], `RPCs without an EpisodicClient method: ${missing.join(", ")}`);
  });

  it("walks the RPCs the contract declares (the generated stubs are not stale)", async () => {
    assert.deepEqual(await generatedRpcs(), declaredRpcs());
  });

  it("streams the server-streaming RPCs as async generators", async () => {
    const streaming: string[] = [];
    for (const file of readdirSync(GEN_DIR).filter((f) => f.endsWith("_service.js"))) {
      const module = (await import(pathToFileURL(join(GEN_DIR, file)).href)) as Record<string, unknown>;
      for (const [name, value] of Object.entries(module)) {
        if (name.endsWith("Service") && typeof value === "object" && value !== null) {
          for (const definition of Object.values(value as Record<string, MethodDefinition>)) {
            if (definition?.responseStream === true) streaming.push(lowerCamel(splitPath(definition.path)[1]));
          }
        }
      }
    }
    assert.deepEqual(streaming.sort(), ["buildContext", "exportUser", "watchEpisode"]);
    const AsyncGeneratorFunction = Object.getPrototypeOf(async function* () {}).constructor;
    const prototype = EpisodicClient.prototype as unknown as Record<string, unknown>;
    for (const name of streaming) assert.ok(prototype[name] instanceof AsyncGeneratorFunction, name);
  });
});

// --- option coverage, checked by tsc ------------------------------------------------------
// Covers<Req, Given> fails to compile, naming the field, when a field of Req is not in Given
// (the keys of the method's option object plus its positional arguments).

type Covers<Req, Given extends PropertyKey> =
  Exclude<keyof Req, Given> extends never ? true : Exclude<keyof Req, Given>;
type Options<M extends keyof EpisodicClient, I extends number> = keyof NonNullable<
  Parameters<Extract<EpisodicClient[M], (...args: never[]) => unknown>>[I]
>;
type Output = "createTime" | "updateTime";

export const optionCoverage: Record<string, true> = {
  // agents
  createAgent: true satisfies Covers<Omit<Agent, Output>, Options<"createAgent", 1> | "agentId">,
  updateAgent: true satisfies Covers<
    Omit<Agent, Output> & { updateMask: unknown },
    Options<"updateAgent", 1> | "agentId"
  >,
  listAgents: true satisfies Covers<ListAgentsRequest, Options<"listAgents", 0>>,
  deleteAgent: true satisfies Covers<DeleteAgentRequest, Options<"deleteAgent", 1> | "agentId">,
  // episodes and messages
  openEpisode: true satisfies Covers<OpenEpisodeRequest, Options<"openEpisode", 2> | "agentId" | "userId">,
  addMessage: true satisfies Covers<MessageInput, Options<"addMessage", 3> | "role" | "content">,
  closeEpisode: true satisfies Covers<CloseEpisodeRequest, Options<"closeEpisode", 1> | "episodeId">,
  listEpisodes: true satisfies Covers<ListEpisodesRequest, Options<"listEpisodes", 0>>,
  listMessages: true satisfies Covers<ListMessagesRequest, Options<"listMessages", 1> | "episodeId">,
  searchEpisodes: true satisfies Covers<
    SearchEpisodesRequest,
    Options<"searchEpisodes", 3> | "agentId" | "userId" | "query"
  >,
  eraseUser: true satisfies Covers<EraseUserRequest, Options<"eraseUser", 1> | "userId">,
  listUsers: true satisfies Covers<ListUsersRequest, Options<"listUsers", 1> | "agentId">,
  exportUser: true satisfies Covers<ExportUserRequest, Options<"exportUser", 1> | "userId">,
  retractMessage: true satisfies Covers<RetractMessageRequest, "episodeId" | "seq">,
  watchEpisode: true satisfies Covers<WatchEpisodeRequest, Options<"watchEpisode", 1> | "episodeId">,
  pushAssistantDelta: true satisfies Covers<PushAssistantDeltaRequest, "episodeId" | "draftId" | "offset" | "text">,
  finalizeAssistantMessage: true satisfies Covers<
    FinalizeAssistantMessageRequest,
    Options<"finalizeAssistantMessage", 2> | "episodeId" | "draftId"
  >,
  // context ("latency" is given as latencyMs)
  buildContext: true satisfies Covers<BuildContextRequest, Options<"buildContext", 1> | "episodeId">,
  listModelCalls: true satisfies Covers<ListModelCallsRequest, Options<"listModelCalls", 1> | "episodeId">,
  recordModelReply: true satisfies Covers<
    RecordModelReplyRequest,
    Exclude<Options<"recordModelReply", 1>, "latencyMs"> | "modelCallId" | "latency"
  >,
  // memories ("ttl" is given as ttlMs; UpdateMemory's mutable fields are those of its mask)
  createMemories: true satisfies Covers<
    CreateMemoriesRequest,
    Options<"createMemories", 3> | "agentId" | "userId" | "memories"
  >,
  listMemories: true satisfies Covers<ListMemoriesRequest, Options<"listMemories", 2> | "agentId" | "userId">,
  updateMemory: true satisfies Covers<
    Pick<Memory, "text" | "kind" | "topics" | "entities" | "eventTime" | "expireTime" | "metadata">,
    Options<"updateMemory", 1>
  >,
  searchMemories: true satisfies Covers<
    SearchMemoriesRequest,
    Options<"searchMemories", 3> | "agentId" | "userId" | "query"
  >,
  updateSessionData: true satisfies Covers<
    UpdateSessionDataRequest,
    Exclude<Options<"updateSessionData", 2>, "ttlMs"> | "episodeId" | "data" | "ttl"
  >,
  callMemoryTool: true satisfies Covers<CallMemoryToolRequest, "episodeId" | "name" | "arguments">,
  // knowledge (UpdateDocument's mutable fields are those of its mask)
  getDocument: true satisfies Covers<GetDocumentRequest, Options<"getDocument", 2> | "agentId" | "documentId">,
  listDocuments: true satisfies Covers<ListDocumentsRequest, Options<"listDocuments", 1> | "agentId">,
  updateDocument: true satisfies Covers<
    Pick<Document, "text" | "format" | "title" | "uri" | "metadata" | "expireTime">,
    Options<"updateDocument", 2>
  >,
  searchKnowledge: true satisfies Covers<SearchKnowledgeRequest, Options<"searchKnowledge", 2> | "agentId" | "query">,
  // diagnostics
  checkIndex: true satisfies Covers<CheckIndexRequest, Options<"checkIndex", 0>>,
};
