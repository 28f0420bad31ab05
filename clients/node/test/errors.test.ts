import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { Metadata, type ServiceError, status as GrpcStatus } from "@grpc/grpc-js";

import {
  EpisodicError,
  fromServiceError,
  InvalidArgumentError,
  ResourceExhaustedError,
  STATUS_DETAILS_KEY,
} from "../src/errors.js";
import { BadRequest, ErrorInfo, RetryInfo } from "../src/gen/google/rpc/error_details.js";
import { Status } from "../src/gen/google/rpc/status.js";

const TYPE_PREFIX = "type.googleapis.com/";

function serviceError(code: GrpcStatus, details: string, trailer?: Uint8Array): ServiceError {
  const metadata = new Metadata();
  if (trailer !== undefined) {
    metadata.set(STATUS_DETAILS_KEY, Buffer.from(trailer));
  }
  return Object.assign(new Error(`${code} ${details}`), { code, details, metadata });
}

function packedStatus(code: GrpcStatus, message: string): Uint8Array {
  return Status.encode({
    code,
    message,
    details: [
      {
        typeUrl: `${TYPE_PREFIX}google.rpc.ErrorInfo`,
        value: Buffer.from(ErrorInfo.encode({ reason: "SLOW_DOWN", domain: "episodic.v1", metadata: {} }).finish()),
      },
      {
        typeUrl: `${TYPE_PREFIX}google.rpc.RetryInfo`,
        value: Buffer.from(RetryInfo.encode({ retryDelay: { seconds: 5, nanos: 250_000_000 } }).finish()),
      },
    ],
  }).finish();
}

describe("fromServiceError", () => {
  it("decodes ErrorInfo and RetryInfo from the status trailer", () => {
    const error = fromServiceError(
      serviceError(
        GrpcStatus.RESOURCE_EXHAUSTED,
        "too many streams",
        packedStatus(GrpcStatus.RESOURCE_EXHAUSTED, "too many streams"),
      ),
    );
    assert.ok(error instanceof ResourceExhaustedError);
    assert.equal(error.reason, "SLOW_DOWN");
    assert.equal(error.domain, "episodic.v1");
    assert.equal(error.retryDelayMs, 5_250);
    assert.equal(error.details, "too many streams");
    assert.equal(error.message, "RESOURCE_EXHAUSTED: too many streams");
  });

  it("collects every field violation of a BadRequest", () => {
    const badRequest = BadRequest.encode(
      BadRequest.fromPartial({
        fieldViolations: [
          { field: "agent.agent_id", description: "is required" },
          { field: "agent.model", description: "is too long" },
        ],
      }),
    ).finish();
    const trailer = Status.encode({
      code: GrpcStatus.INVALID_ARGUMENT,
      message: "invalid request",
      details: [{ typeUrl: `${TYPE_PREFIX}google.rpc.BadRequest`, value: Buffer.from(badRequest) }],
    }).finish();
    const error = fromServiceError(serviceError(GrpcStatus.INVALID_ARGUMENT, "invalid request", trailer));
    assert.ok(error instanceof InvalidArgumentError);
    assert.deepEqual(error.fieldViolations, [
      { field: "agent.agent_id", description: "is required" },
      { field: "agent.model", description: "is too long" },
    ]);
  });

  it("keeps the code and message when the trailer is malformed", () => {
    const error = fromServiceError(serviceError(GrpcStatus.NOT_FOUND, "gone", new Uint8Array([0xff, 0xff, 0xff])));
    assert.ok(error instanceof EpisodicError);
    assert.equal(error.codeName, "NOT_FOUND");
    assert.equal(error.details, "gone");
    assert.equal(error.reason, "");
  });

  it("ignores a status whose code disagrees with the call's", () => {
    const error = fromServiceError(
      serviceError(GrpcStatus.UNAVAILABLE, "down", packedStatus(GrpcStatus.RESOURCE_EXHAUSTED, "too many")),
    );
    assert.ok(error instanceof EpisodicError);
    assert.equal(error.code, GrpcStatus.UNAVAILABLE);
    assert.equal(error.reason, "");
    assert.equal(error.retryDelayMs, undefined);
  });

  it("falls back to EpisodicError for a code without a subclass", () => {
    const error = fromServiceError(serviceError(GrpcStatus.DATA_LOSS, "lost"));
    assert.equal((error as EpisodicError).constructor, EpisodicError);
    assert.equal((error as EpisodicError).codeName, "DATA_LOSS");
  });

  it("passes through what is not a gRPC error", () => {
    const plain = new TypeError("not a call");
    assert.equal(fromServiceError(plain), plain);
  });
});
