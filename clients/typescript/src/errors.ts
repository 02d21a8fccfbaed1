// Typed errors of the memsvc client: the gRPC status plus the google.rpc details the server sends.
import { Code, ConnectError } from "@connectrpc/connect";
import {
  BadRequestSchema,
  ErrorInfoSchema,
  RequestInfoSchema,
  RetryInfoSchema,
} from "./gen/google/rpc/error_details_pb.js";

/** The canonical gRPC status codes, by their names in the gRPC specification. */
export const GrpcStatus = {
  OK: 0,
  CANCELLED: 1,
  UNKNOWN: 2,
  INVALID_ARGUMENT: 3,
  DEADLINE_EXCEEDED: 4,
  NOT_FOUND: 5,
  ALREADY_EXISTS: 6,
  PERMISSION_DENIED: 7,
  RESOURCE_EXHAUSTED: 8,
  FAILED_PRECONDITION: 9,
  ABORTED: 10,
  OUT_OF_RANGE: 11,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14,
  DATA_LOSS: 15,
  UNAUTHENTICATED: 16,
} as const;

/** The name of a gRPC status code, such as `INVALID_ARGUMENT`. */
export type GrpcStatusName = keyof typeof GrpcStatus;

const STATUS_NAMES = new Map<number, GrpcStatusName>(
  (Object.entries(GrpcStatus) as [GrpcStatusName, number][]).map(([name, code]) => [code, name]),
);

/** One invalid field of a request, from a google.rpc.BadRequest detail. */
export interface FieldViolation {
  /** Path to the field, for example `memories[0].content`. */
  readonly field: string;
  /** Why the value is invalid. */
  readonly description: string;
  /** A machine-readable reason, empty when the server gave none. */
  readonly reason: string;
}

/**
 * MemsvcError is what every failed call of MemoryClient throws.
 *
 * `code` is the gRPC status code (compare it with `GrpcStatus`), `reason`, `domain` and
 * `metadata` come from the google.rpc.ErrorInfo detail, `fieldViolations` from the
 * google.rpc.BadRequest detail. Errors raised before the server answered (no connection,
 * deadline) carry a code but no details.
 */
export class MemsvcError extends Error {
  override readonly name = "MemsvcError";
  /** The gRPC status code. */
  readonly code: number;
  /** The name of the status code, for example `INVALID_ARGUMENT`. */
  readonly codeName: GrpcStatusName;
  /** The status message of the server, without the code in front. */
  readonly statusMessage: string;
  /** ErrorInfo.reason in UPPER_SNAKE_CASE, or undefined when the server sent no ErrorInfo. */
  readonly reason: string | undefined;
  /** ErrorInfo.domain, or undefined when the server sent no ErrorInfo. */
  readonly domain: string | undefined;
  /** ErrorInfo.metadata; empty when the server sent none. */
  readonly metadata: Readonly<Record<string, string>>;
  /** The invalid fields of the request, from BadRequest; empty when there are none. */
  readonly fieldViolations: readonly FieldViolation[];
  /** How long the server asks to wait before a retry (RetryInfo), in milliseconds. */
  readonly retryDelayMs: number | undefined;
  /** The server's id of the request (RequestInfo), when it sent one. */
  readonly requestId: string | undefined;

  constructor(init: {
    code: number;
    statusMessage: string;
    reason?: string | undefined;
    domain?: string | undefined;
    metadata?: Record<string, string>;
    fieldViolations?: FieldViolation[];
    retryDelayMs?: number | undefined;
    requestId?: string | undefined;
    cause?: unknown;
  }) {
    const codeName = STATUS_NAMES.get(init.code) ?? "UNKNOWN";
    const why = init.reason ? ` (${init.reason})` : "";
    super(`${codeName}${why}: ${init.statusMessage}`, { cause: init.cause });
    this.code = init.code;
    this.codeName = codeName;
    this.statusMessage = init.statusMessage;
    this.reason = init.reason;
    this.domain = init.domain;
    this.metadata = init.metadata ?? {};
    this.fieldViolations = init.fieldViolations ?? [];
    this.retryDelayMs = init.retryDelayMs;
    this.requestId = init.requestId;
  }

  /** The violation of one field path, if the server reported one. */
  violation(field: string): FieldViolation | undefined {
    return this.fieldViolations.find((v) => v.field === field);
  }

  /** Turn anything a Connect call threw into a MemsvcError, decoding the status details. */
  static from(error: unknown): MemsvcError {
    if (error instanceof MemsvcError) {
      return error;
    }
    const connectError = ConnectError.from(error, Code.Unknown);
    const info = connectError.findDetails(ErrorInfoSchema)[0];
    const retry = connectError.findDetails(RetryInfoSchema)[0]?.retryDelay;
    const requestInfo = connectError.findDetails(RequestInfoSchema)[0];
    const fieldViolations = connectError
      .findDetails(BadRequestSchema)
      .flatMap((bad) => bad.fieldViolations)
      .map((v) => ({ field: v.field, description: v.description, reason: v.reason }));
    return new MemsvcError({
      code: connectError.code,
      statusMessage: connectError.rawMessage,
      reason: info?.reason,
      domain: info?.domain,
      metadata: info ? { ...info.metadata } : {},
      fieldViolations,
      retryDelayMs:
        retry === undefined ? undefined : Number(retry.seconds) * 1000 + retry.nanos / 1e6,
      requestId: requestInfo?.requestId || undefined,
      cause: error,
    });
  }
}
