/**
 * The result of BuildContext, joined from the frames of its stream.
 *
 * The server packs the rendered messages into frames under its maximum message size; a
 * message larger than a frame arrives as parts with the same `index`, all but the last with
 * `contentContinues` set. The report rides on the last frame.
 */
import { status as GrpcStatus } from "@grpc/grpc-js";

import type { ContextMessage, ContextReport } from "./gen/episodic/v1/context.js";
import type { BuildContextResponse } from "./gen/episodic/v1/context_service.js";
import { Role } from "./gen/episodic/v1/episode.js";
import { EpisodicError } from "./errors.js";

/** What the model should see, whole: the messages in order, and the report of the call. */
export interface BuiltContext {
  messages: ContextMessage[];
  report: ContextReport;
  /** Every message as "role: content", separated by blank lines (for logs and quick looks). */
  text: string;
}

/** The messages of every frame with their parts joined, and the last frame's report. */
export async function joinFrames(
  frames: AsyncIterable<BuildContextResponse> | Iterable<BuildContextResponse>,
): Promise<BuiltContext> {
  const messages: ContextMessage[] = [];
  let report: ContextReport | undefined;
  for await (const frame of frames) {
    for (const part of frame.messages) {
      addPart(messages, part);
    }
    report = frame.report ?? report;
  }
  if (report === undefined || messages.at(-1)?.contentContinues) {
    throw brokenStream("the BuildContext stream ended before its report or mid-message");
  }
  return { messages, report, text: renderText(messages) };
}

export function renderText(messages: readonly ContextMessage[]): string {
  return messages.map((m) => `${roleName(m.role)}: ${m.content}`).join("\n\n");
}

/** "user" for ROLE_USER; the number for a role this client does not know. */
export function roleName(role: Role): string {
  const name = Role[role] as string | undefined;
  return name?.startsWith("ROLE_") ? name.slice("ROLE_".length).toLowerCase() : String(role);
}

function addPart(messages: ContextMessage[], part: ContextMessage): void {
  const last = messages.at(-1);
  if (last?.contentContinues) {
    if (part.index !== last.index) {
      throw brokenStream(`message ${last.index} continues, but the next part is message ${part.index}`);
    }
    last.content += part.content;
    last.contentContinues = part.contentContinues;
    return;
  }
  messages.push({ ...part });
}

function brokenStream(message: string): EpisodicError {
  return new EpisodicError(GrpcStatus.INTERNAL, message, { reason: "BROKEN_STREAM" });
}
