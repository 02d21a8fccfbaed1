// Unit tests of MemoryClient against an in-process Connect gRPC server (no memsvc needed).
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, type ConnectRouter } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import assert from "node:assert/strict";
import * as http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { BadRequestSchema, ErrorInfoSchema } from "../src/gen/google/rpc/error_details_pb.js";
import { MemorySchema } from "../src/gen/memsvc/v1/memory_pb.js";
import { QueryService } from "../src/gen/memsvc/v1/query_service_pb.js";
import { WriteService } from "../src/gen/memsvc/v1/write_service_pb.js";
import { GrpcStatus, MemoryClient, MemsvcError, baseUrlOf } from "../src/index.js";

const API_KEY = "unit-test-key";

function routes(router: ConnectRouter): void {
  router.service(WriteService, {
    addMemories(request, context) {
      if (context.requestHeader.get("authorization") !== `Bearer ${API_KEY}`) {
        throw new ConnectError("missing or wrong API key", Code.Unauthenticated);
      }
      const empty = request.memories.findIndex((m) => m.content === "");
      if (empty >= 0) {
        throw new ConnectError("content must not be empty", Code.InvalidArgument, undefined, [
          {
            desc: ErrorInfoSchema,
            value: { reason: "INVALID_FIELD", domain: "memsvc.v1", metadata: { field: "content" } },
          },
          {
            desc: BadRequestSchema,
            value: {
              fieldViolations: [
                { field: `memories[${empty}].content`, description: "must not be empty" },
              ],
            },
          },
        ]);
      }
      return {
        memories: request.memories.map((m, i) =>
          create(MemorySchema, { id: `m${i}`, userId: request.userId, content: m.content }),
        ),
        created: request.memories.map(() => true),
      };
    },
    async getMemory(request) {
      await sleep(500);
      return { memory: { id: request.id, userId: request.userId } };
    },
    forgetUser() {
      return { deletedCount: 3n };
    },
  });
  router.service(QueryService, {});
}

describe("MemoryClient against a local server", () => {
  let server: http2.Http2Server;
  let address = "";

  before(async () => {
    server = http2.createServer(connectNodeAdapter({ routes }));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    address = `127.0.0.1:${(server.address() as AddressInfo).port}`;
  });

  after(async () => {
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  test("sends the API key and returns the typed response", async () => {
    const client = new MemoryClient(address, API_KEY);
    try {
      const response = await client.addMemories("u1", [{ content: "likes tea" }]);
      assert.equal(response.memories[0]?.content, "likes tea");
      assert.equal(response.memories[0]?.userId, "u1");
      assert.deepEqual(response.created, [true]);
      assert.equal(await client.forgetUser("u1"), 3n);
    } finally {
      client.close();
    }
  });

  test("a wrong key surfaces as UNAUTHENTICATED", async () => {
    const client = new MemoryClient(address, "wrong");
    try {
      await assert.rejects(client.addMemories("u1", [{ content: "x" }]), (error: unknown) => {
        assert.ok(error instanceof MemsvcError);
        assert.equal(error.code, GrpcStatus.UNAUTHENTICATED);
        assert.equal(error.codeName, "UNAUTHENTICATED");
        return true;
      });
    } finally {
      client.close();
    }
  });

  test("status details become ErrorInfo fields and field violations", async () => {
    const client = new MemoryClient(address, API_KEY);
    try {
      await assert.rejects(
        client.addMemories("u1", [{ content: "ok" }, { content: "" }]),
        (error: unknown) => {
          assert.ok(error instanceof MemsvcError);
          assert.equal(error.code, GrpcStatus.INVALID_ARGUMENT);
          assert.equal(error.statusMessage, "content must not be empty");
          assert.equal(error.reason, "INVALID_FIELD");
          assert.equal(error.domain, "memsvc.v1");
          assert.deepEqual(error.metadata, { field: "content" });
          assert.deepEqual(error.fieldViolations, [
            { field: "memories[1].content", description: "must not be empty", reason: "" },
          ]);
          assert.ok(error.violation("memories[1].content"));
          assert.match(error.message, /^INVALID_ARGUMENT \(INVALID_FIELD\): /);
          return true;
        },
      );
    } finally {
      client.close();
    }
  });

  test("the deadline applies to every call and can be set per call", async () => {
    const client = new MemoryClient(address, API_KEY, { deadlineMs: 100 });
    try {
      await assert.rejects(client.getMemory("u1", "m1"), (error: unknown) => {
        assert.ok(error instanceof MemsvcError);
        assert.equal(error.code, GrpcStatus.DEADLINE_EXCEEDED);
        return true;
      });
      const memory = await client.getMemory("u1", "m1", { timeoutMs: 5_000 });
      assert.equal(memory.id, "m1");
    } finally {
      client.close();
    }
  });

  test("an unreachable server surfaces as UNAVAILABLE", async () => {
    const client = new MemoryClient("127.0.0.1:1", API_KEY, { deadlineMs: 2_000 });
    try {
      await assert.rejects(client.forgetUser("u1"), (error: unknown) => {
        assert.ok(error instanceof MemsvcError);
        assert.equal(error.codeName, "UNAVAILABLE");
        return true;
      });
    } finally {
      client.close();
    }
  });
});

test("addresses become base URLs", () => {
  assert.equal(baseUrlOf("localhost:50051", undefined), "http://localhost:50051");
  assert.equal(baseUrlOf("memsvc.example:443", true), "https://memsvc.example:443");
  assert.equal(baseUrlOf("https://memsvc.example/", false), "https://memsvc.example");
  assert.throws(() => baseUrlOf("", false), TypeError);
  assert.throws(() => new MemoryClient("localhost:1", ""), TypeError);
});
