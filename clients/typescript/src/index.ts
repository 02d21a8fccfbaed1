// Public surface of the memsvc TypeScript client: the client, its errors and the generated types.
export {
  MemoryClient,
  baseUrlOf,
  type AddConversationRequestInit,
  type IterateMemoriesRequest,
  type ListMemoriesRequestInit,
  type MemoryCallOptions,
  type MemoryClientOptions,
  type NewMemoryInit,
  type QueryRequestInit,
  type TlsOptions,
  type UpdateMemoryRequestInit,
} from "./client.js";
export { GrpcStatus, MemsvcError, type FieldViolation, type GrpcStatusName } from "./errors.js";
export * from "./gen/memsvc/v1/memory_pb.js";
export * from "./gen/memsvc/v1/query_service_pb.js";
export * from "./gen/memsvc/v1/write_service_pb.js";
