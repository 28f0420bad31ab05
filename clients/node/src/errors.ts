/**
 * The client's error tree, and the one translation from a failed gRPC call into it.
 *
 *     EpisodicError                 any failed RPC; codes without a subclass land here
 *     ├── InvalidArgumentError      fieldViolations names every wrong field
 *     ├── NotFoundError             resourceType / resourceName name what was missing
 *     ├── AlreadyExistsError
 *     ├── FailedPreconditionError   e.g. appending to a closed episode
 *     ├── UnauthenticatedError      missing or unknown API key
 *     ├── PermissionDeniedError     the key may not use that agent
 *     ├── ResourceExhaustedError    retryDelayMs says when to try again; quotaId which share
 *     ├── AbortedError
 *     ├── DeadlineExceededError
 *     ├── UnavailableError          server down, unreachable or shutting down
 *     ├── InternalError
 *     └── ClientClosedError         a call on a client after close(); never reached the network
 *
 * The server sends a google.rpc.Status in the `grpc-status-details-bin` trailer: its
 * ErrorInfo gives `reason` (machine-readable, e.g. "EPISODE_NOT_FOUND") and `domain`,
 * BadRequest the field violations, RetryInfo the delay, ResourceInfo the missing resource,
 * QuotaFailure the tenant's share that was spent (e.g. "requests_per_second").
 */
import { type Metadata, type ServiceError, status as GrpcStatus } from "@grpc/grpc-js";

import {
  BadRequest,
  ErrorInfo,
  QuotaFailure,
  ResourceInfo,
  RetryInfo,
} from "./gen/google/rpc/error_details.js";
import { Status } from "./gen/google/rpc/status.js";

export const STATUS_DETAILS_KEY = "grpc-status-details-bin";

export interface FieldViolation {
  /** The request field at fault, as a path (e.g. "agent.agent_id"). */
  field: string;
  description: string;
}

/** What a failed call carried besides its code and message. */
export interface ErrorDetails {
  reason?: string;
  domain?: string;
  fieldViolations?: FieldViolation[];
  retryDelayMs?: number;
  quotaId?: string;
  resourceType?: string;
  resourceName?: string;
  metadata?: Metadata;
  cause?: unknown;
}

export class EpisodicError extends Error {
  /** The gRPC status code (`status` of @grpc/grpc-js). */
  readonly code: GrpcStatus;
  /** The status code's name, e.g. "NOT_FOUND". */
  readonly codeName: string;
  /** The server's human-readable message. */
  readonly details: string;
  /** google.rpc.ErrorInfo reason, or "" when the status carried none. */
  readonly reason: string;
  /** google.rpc.ErrorInfo domain ("episodic.v1" for the server's own errors), or "". */
  readonly domain: string;
  readonly fieldViolations: FieldViolation[];
  /** google.rpc.RetryInfo: wait at least this long before retrying; undefined when absent. */
  readonly retryDelayMs: number | undefined;
  /** google.rpc.QuotaFailure: the share a RESOURCE_EXHAUSTED refusal names, or "". */
  readonly quotaId: string;
  readonly resourceType: string;
  readonly resourceName: string;
  /** The call's trailers, when the error came from the server (kept out of logs of the error). */
  declare readonly metadata: Metadata | undefined;

  constructor(code: GrpcStatus, details: string, extra: ErrorDetails = {}) {
    const codeName = GrpcStatus[code] ?? `CODE_${code}`;
    super(`${codeName}: ${details}`, extra.cause === undefined ? undefined : { cause: extra.cause });
    this.name = new.target.name;
    this.code = code;
    this.codeName = codeName;
    this.details = details;
    this.reason = extra.reason ?? "";
    this.domain = extra.domain ?? "";
    this.fieldViolations = extra.fieldViolations ?? [];
    this.retryDelayMs = extra.retryDelayMs;
    this.quotaId = extra.quotaId ?? "";
    this.resourceType = extra.resourceType ?? "";
    this.resourceName = extra.resourceName ?? "";
    Object.defineProperty(this, "metadata", { value: extra.metadata, enumerable: false });
  }
}

export class InvalidArgumentError extends EpisodicError {}
export class NotFoundError extends EpisodicError {}
export class AlreadyExistsError extends EpisodicError {}
export class FailedPreconditionError extends EpisodicError {}
export class UnauthenticatedError extends EpisodicError {}
export class PermissionDeniedError extends EpisodicError {}
export class ResourceExhaustedError extends EpisodicError {}
export class AbortedError extends EpisodicError {}
export class DeadlineExceededError extends EpisodicError {}
export class UnavailableError extends EpisodicError {}
export class InternalError extends EpisodicError {}

export class ClientClosedError extends EpisodicError {
  constructor() {
    super(GrpcStatus.CANCELLED, "the EpisodicClient is closed; create a new one to make calls", {
      reason: "CLIENT_CLOSED",
    });
  }
}

type ErrorClass = new (code: GrpcStatus, details: string, extra?: ErrorDetails) => EpisodicError;

export const ERROR_BY_CODE: ReadonlyMap<GrpcStatus, ErrorClass> = new Map<GrpcStatus, ErrorClass>([
  [GrpcStatus.INVALID_ARGUMENT, InvalidArgumentError],
  [GrpcStatus.NOT_FOUND, NotFoundError],
  [GrpcStatus.ALREADY_EXISTS, AlreadyExistsError],
  [GrpcStatus.FAILED_PRECONDITION, FailedPreconditionError],
  [GrpcStatus.UNAUTHENTICATED, UnauthenticatedError],
  [GrpcStatus.PERMISSION_DENIED, PermissionDeniedError],
  [GrpcStatus.RESOURCE_EXHAUSTED, ResourceExhaustedError],
  [GrpcStatus.ABORTED, AbortedError],
  [GrpcStatus.DEADLINE_EXCEEDED, DeadlineExceededError],
  [GrpcStatus.UNAVAILABLE, UnavailableError],
  [GrpcStatus.INTERNAL, InternalError],
]);

/** The EpisodicError for a failed call; anything that is not a gRPC error is returned as is. */
export function fromServiceError(error: unknown): unknown {
  if (error instanceof EpisodicError || !isServiceError(error)) {
    return error;
  }
  const extra = { ...decodeDetails(error), metadata: error.metadata, cause: error };
  const cls = ERROR_BY_CODE.get(error.code) ?? EpisodicError;
  return new cls(error.code, error.details || error.message, extra);
}

function isServiceError(error: unknown): error is ServiceError {
  return error instanceof Error && typeof (error as Partial<ServiceError>).code === "number" && "metadata" in error;
}

/** The rich status's details, or none when the trailer is absent, malformed or disagrees with the code. */
export function decodeDetails(error: ServiceError): ErrorDetails {
  const raw = error.metadata?.get(STATUS_DETAILS_KEY)[0];
  if (!(raw instanceof Uint8Array)) {
    return {};
  }
  try {
    const status = Status.decode(raw);
    return status.code === error.code ? detailsOf(status) : {};
  } catch {
    return {}; // a malformed status must not hide the original error
  }
}

function detailsOf(status: Status): ErrorDetails {
  const found: ErrorDetails = {};
  for (const any of status.details) {
    switch (any.typeUrl.slice(any.typeUrl.lastIndexOf("/") + 1)) {
      case "google.rpc.ErrorInfo": {
        const info = ErrorInfo.decode(any.value);
        found.reason = info.reason;
        found.domain = info.domain;
        break;
      }
      case "google.rpc.BadRequest": {
        const violations = BadRequest.decode(any.value).fieldViolations;
        found.fieldViolations = [
          ...(found.fieldViolations ?? []),
          ...violations.map((v) => ({ field: v.field, description: v.description })),
        ];
        break;
      }
      case "google.rpc.RetryInfo": {
        const delay = RetryInfo.decode(any.value).retryDelay;
        if (delay !== undefined) {
          found.retryDelayMs = delay.seconds * 1000 + Math.floor(delay.nanos / 1e6);
        }
        break;
      }
      case "google.rpc.QuotaFailure": {
        found.quotaId = QuotaFailure.decode(any.value).violations[0]?.quotaId ?? "";
        break;
      }
      case "google.rpc.ResourceInfo": {
        const resource = ResourceInfo.decode(any.value);
        found.resourceType = resource.resourceType;
        found.resourceName = resource.resourceName;
        break;
      }
    }
  }
  return found;
}
