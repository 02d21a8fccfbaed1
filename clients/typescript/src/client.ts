// MemoryClient: a thin typed client of memsvc.v1 over the gRPC protocol (Connect for Node.js).
import type { MessageInitShape } from "@bufbuild/protobuf";
import { createClient, type CallOptions, type Client, type Interceptor } from "@connectrpc/connect";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import type { SecureClientSessionOptions } from "node:http2";
import type { Memory, MemoryFilterSchema } from "./gen/memsvc/v1/memory_pb.js";
import {
  QueryService,
  type QueryRequestSchema,
  type QueryResponse,
} from "./gen/memsvc/v1/query_service_pb.js";
import {
  WriteService,
  type AddConversationRequestSchema,
  type AddConversationResponse,
  type AddMemoriesResponse,
  type ListMemoriesRequestSchema,
  type ListMemoriesResponse,
  type NewMemorySchema,
  type UpdateMemoryRequestSchema,
} from "./gen/memsvc/v1/write_service_pb.js";
import { MemsvcError } from "./errors.js";

/** A memory to store: the fields of memsvc.v1.NewMemory, all optional but `content`. */
export type NewMemoryInit = MessageInitShape<typeof NewMemorySchema>;
/**
 * The fields of memsvc.v1.AddConversationRequest: `userId`, `sessionId` and `turns` (role, content,
 * createTime, name) are required by the server; `firstTurnIndex` is the first turn's index in the session.
 */
export type AddConversationRequestInit = MessageInitShape<typeof AddConversationRequestSchema>;
/** The fields of memsvc.v1.QueryRequest; `userId` and `query` are required by the server. */
export type QueryRequestInit = MessageInitShape<typeof QueryRequestSchema>;
/** The fields of memsvc.v1.ListMemoriesRequest; `userId` is required by the server. */
export type ListMemoriesRequestInit = MessageInitShape<typeof ListMemoriesRequestSchema>;
/** What iterateMemories lists: a user, an optional filter and page size. */
export interface IterateMemoriesRequest {
  /** The user whose memories to list. */
  userId: string;
  /** Which memories to list. */
  filter?: MessageInitShape<typeof MemoryFilterSchema>;
  /** Memories per page, 1 to 500; the server's default when unset. */
  pageSize?: number;
}
/** The fields of memsvc.v1.UpdateMemoryRequest. */
export type UpdateMemoryRequestInit = MessageInitShape<typeof UpdateMemoryRequestSchema>;

/** TLS settings: `true` for the system's trust store, or Node.js TLS options (ca, cert, key). */
export type TlsOptions = boolean | SecureClientSessionOptions;

/** Options of a MemoryClient. */
export interface MemoryClientOptions {
  /** Deadline of each call in milliseconds unless the call sets its own; 10,000 by default. */
  deadlineMs?: number;
  /** Use TLS; off by default (plaintext HTTP/2), or forced by an `https://` address. */
  tls?: TlsOptions;
  /** Further Connect interceptors, run after the one that adds the API key. */
  interceptors?: Interceptor[];
}

/** Options of one call: its deadline, an abort signal, extra headers. */
export type MemoryCallOptions = Pick<CallOptions, "timeoutMs" | "signal" | "headers">;

const DEFAULT_DEADLINE_MS = 10_000;

/** Build the base URL of the transport from `host:port` or an `http(s)://` URL. */
export function baseUrlOf(address: string, tls: TlsOptions | undefined): string {
  if (/^https?:\/\//.test(address)) {
    return address.replace(/\/+$/, "");
  }
  if (address.trim() === "" || address.includes("/")) {
    throw new TypeError(`memsvc address must be host:port or an http(s) URL, got ${JSON.stringify(address)}`);
  }
  return `${tls ? "https" : "http"}://${address}`;
}

/**
 * MemoryClient calls memsvc's WriteService and QueryService with an API key.
 *
 * Every method throws a MemsvcError on failure. Call `close()` when done so that the
 * HTTP/2 connection does not keep the process alive.
 */
export class MemoryClient {
  private readonly write: Client<typeof WriteService>;
  private readonly queries: Client<typeof QueryService>;
  private readonly abort = new AbortController();
  private readonly session: Http2SessionManager;

  constructor(address: string, apiKey: string, options: MemoryClientOptions = {}) {
    if (!apiKey) {
      throw new TypeError("memsvc apiKey must not be empty");
    }
    const authorization = `Bearer ${apiKey}`;
    const addKey: Interceptor = (next) => async (req) => {
      req.header.set("authorization", authorization);
      return next(req);
    };
    const baseUrl = baseUrlOf(address, options.tls);
    const nodeOptions = typeof options.tls === "object" ? options.tls : {};
    this.session = new Http2SessionManager(baseUrl, {}, nodeOptions);
    const transport = createGrpcTransport({
      baseUrl,
      sessionManager: this.session,
      defaultTimeoutMs: options.deadlineMs ?? DEFAULT_DEADLINE_MS,
      interceptors: [addKey, ...(options.interceptors ?? [])],
    });
    this.write = createClient(WriteService, transport);
    this.queries = createClient(QueryService, transport);
  }

  /** Store memories for one user; returns them in request order with `created` flags. */
  addMemories(
    userId: string,
    memories: NewMemoryInit[],
    call?: MemoryCallOptions,
  ): Promise<AddMemoriesResponse> {
    return this.run(call, (o) => this.write.addMemories({ userId, memories }, o));
  }

  /**
   * Hand memsvc a session's new turns: each is kept as evidence, and the memories they state and
   * the session's summary are derived from the new ones. A resent turn (same session index) is
   * stored once.
   */
  addConversation(
    request: AddConversationRequestInit,
    call?: MemoryCallOptions,
  ): Promise<AddConversationResponse> {
    return this.run(call, (o) => this.write.addConversation(request, o));
  }

  /** Ask which memories of a user matter for a query text (`includeSources` for derived memories' turns). */
  query(request: QueryRequestInit, call?: MemoryCallOptions): Promise<QueryResponse> {
    return this.run(call, (o) => this.queries.query(request, o));
  }

  /** Read one memory. */
  async getMemory(userId: string, id: string, call?: MemoryCallOptions): Promise<Memory> {
    const response = await this.run(call, (o) => this.write.getMemory({ userId, id }, o));
    return requireMemory(response.memory);
  }

  /** Read one page of a user's memories, newest first. */
  listMemories(
    request: ListMemoriesRequestInit,
    call?: MemoryCallOptions,
  ): Promise<ListMemoriesResponse> {
    return this.run(call, (o) => this.write.listMemories(request, o));
  }

  /** Iterate over every memory of a user, fetching pages as needed. */
  async *iterateMemories(
    request: IterateMemoriesRequest,
    call?: MemoryCallOptions,
  ): AsyncGenerator<Memory, void, undefined> {
    let pageToken = "";
    do {
      const page = await this.listMemories({ ...request, pageToken }, call);
      yield* page.memories;
      pageToken = page.nextPageToken;
    } while (pageToken !== "");
  }

  /** Change the fields of a memory named in `updateMask`; returns the memory after the change. */
  async updateMemory(request: UpdateMemoryRequestInit, call?: MemoryCallOptions): Promise<Memory> {
    const response = await this.run(call, (o) => this.write.updateMemory(request, o));
    return requireMemory(response.memory);
  }

  /** Delete one memory. */
  async deleteMemory(userId: string, id: string, call?: MemoryCallOptions): Promise<void> {
    await this.run(call, (o) => this.write.deleteMemory({ userId, id }, o));
  }

  /** Erase everything of one user; returns how many memories were erased. */
  async forgetUser(userId: string, call?: MemoryCallOptions): Promise<bigint> {
    const response = await this.run(call, (o) => this.write.forgetUser({ userId }, o));
    return response.deletedCount;
  }

  /** Cancel calls in flight and close the HTTP/2 connection; the client is unusable after. */
  close(): void {
    this.abort.abort();
    this.session.abort();
  }

  private async run<T>(
    call: MemoryCallOptions | undefined,
    invoke: (options: CallOptions) => Promise<T>,
  ): Promise<T> {
    const signal = call?.signal
      ? AbortSignal.any([call.signal, this.abort.signal])
      : this.abort.signal;
    try {
      return await invoke({ ...call, signal });
    } catch (error) {
      throw MemsvcError.from(error);
    }
  }
}

function requireMemory(memory: Memory | undefined): Memory {
  if (memory === undefined) {
    throw new MemsvcError({ code: 13, statusMessage: "the server returned no memory" });
  }
  return memory;
}
