// End-to-end test of MemoryClient against a running memsvc (MEMSVC_ADDRESS, MEMSVC_API_KEY); over
// TLS when MEMSVC_CA_FILE names the CA of the server's certificate, with the client certificate of
// MEMSVC_CLIENT_CERT_FILE and MEMSVC_CLIENT_KEY_FILE for a server that requires one.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { after, describe, test } from "node:test";
import {
  Extractor,
  GrpcStatus,
  MemoryClient,
  MemoryKind,
  MemsvcError,
  Role,
  WriteOutcome,
} from "../src/index.js";

const address = process.env["MEMSVC_ADDRESS"] ?? "";
const apiKey = process.env["MEMSVC_API_KEY"] ?? "";
const skip = address && apiKey ? false : "MEMSVC_ADDRESS and MEMSVC_API_KEY are not set";
const caFile = process.env["MEMSVC_CA_FILE"] ?? "";
const certFile = process.env["MEMSVC_CLIENT_CERT_FILE"] ?? "";
const keyFile = process.env["MEMSVC_CLIENT_KEY_FILE"] ?? "";
const tls = caFile
  ? {
      ca: readFileSync(caFile),
      ...(certFile && keyFile ? { cert: readFileSync(certFile), key: readFileSync(keyFile) } : {}),
    }
  : undefined;

describe("memsvc end to end", { skip }, () => {
  // The first calls may load the embedding model, hence the generous deadline.
  const client = skip ? undefined : new MemoryClient(address, apiKey, { deadlineMs: 120_000, tls });
  const userId = `ts-e2e-${randomUUID()}`;

  after(async () => {
    await client?.forgetUser(userId).catch(() => undefined);
    client?.close();
  });

  test("adds memories for a fresh user and finds them by query", async () => {
    assert.ok(client);
    const added = await client.addMemories(userId, [
      {
        content: "My dog is a beagle called Biscuit who loves the beach.",
        kind: MemoryKind.FACT,
        importance: 0.9,
        tags: ["pets"],
      },
      {
        content: "I am learning to play the cello on Tuesday evenings.",
        kind: MemoryKind.EPISODE,
        importance: 0.8,
      },
    ]);
    assert.equal(added.memories.length, 2);
    const dog = added.memories[0];
    assert.ok(dog?.id, "the server assigns an id");
    assert.equal(dog.userId, userId);
    assert.deepEqual(added.created, [true, true]);

    const fetched = await client.getMemory(userId, dog.id);
    assert.equal(fetched.content, dog.content);

    const response = await client.query({ userId, query: "What is the name of my dog?" });
    const ids = response.memories.map((r) => r.memory?.id);
    assert.ok(ids.includes(dog.id), `query results ${JSON.stringify(ids)} miss ${dog.id}`);
    const hit = response.memories.find((r) => r.memory?.id === dog.id);
    assert.ok(hit && hit.score > 0 && hit.score <= 1, "the hit carries a score in (0, 1]");

    const listed = [];
    for await (const memory of client.iterateMemories({ userId })) {
      listed.push(memory.id);
    }
    assert.deepEqual(new Set(listed), new Set(added.memories.map((m) => m.id)));
  });

  test("a conversation's turns are kept and what they state is found with its source", async () => {
    assert.ok(client);
    const turns = [
      { role: Role.USER, name: "Ana", content: "I adopted a greyhound named Pepper." },
      { role: Role.ASSISTANT, content: "Lovely! You should try the dog park on Elm Street." },
    ];
    const added = await client.addConversation({ userId, sessionId: "s1", turns });
    assert.deepEqual(
      added.turns.map((t) => t.content),
      turns.map((t) => t.content),
    );
    assert.equal(added.turns[0]?.speakerName, "Ana");
    const advice = added.extracted.find((m) => m.kind === MemoryKind.RECOMMENDATION);
    assert.ok(advice, `no recommendation among ${JSON.stringify(added.extracted.map((m) => m.content))}`);
    assert.deepEqual(advice.sourceMemoryIds, [added.turns[1]?.id]);
    assert.equal(added.extractor, Extractor.RULES);
    assert.deepEqual(
      added.extractedResults.map((r) => r.outcome),
      added.extracted.map(() => WriteOutcome.CREATED),
    );

    const resent = await client.addConversation({ userId, sessionId: "s1", turns });
    assert.deepEqual(
      resent.turns.map((t) => t.id),
      added.turns.map((t) => t.id),
    );
    assert.equal(resent.extracted.length, 0);
    assert.deepEqual(
      resent.turnResults.map((r) => r.outcome),
      [WriteOutcome.IDEMPOTENT_REPLAY, WriteOutcome.IDEMPOTENT_REPLAY],
    );

    const response = await client.query({ userId, query: "which dog park was suggested?", includeSources: true });
    const hit = response.memories.find((r) => r.memory?.id === advice.id);
    assert.ok(hit, "the recommendation is found");
    assert.deepEqual(
      hit.sources.map((s) => s.id),
      [added.turns[1]?.id],
    );
    assert.ok((hit.scoreBreakdown?.relevance ?? 0) > 0, "the hit carries its absolute relevance");
  });

  test("an empty content is a typed INVALID_ARGUMENT naming the field", async () => {
    assert.ok(client);
    await assert.rejects(client.addMemories(userId, [{ content: "" }]), (error: unknown) => {
      assert.ok(error instanceof MemsvcError, `expected MemsvcError, got ${String(error)}`);
      assert.equal(error.code, GrpcStatus.INVALID_ARGUMENT);
      assert.ok(error.reason, "the status carries a google.rpc.ErrorInfo reason");
      const fields = error.fieldViolations.map((v) => v.field);
      assert.ok(
        fields.some((field) => field === "content" || field.endsWith(".content")),
        `field violations ${JSON.stringify(fields)} do not name the content field`,
      );
      return true;
    });
  });

  test("a turn with no content is a typed INVALID_ARGUMENT naming the turn", async () => {
    assert.ok(client);
    const turns = [{ role: Role.USER, content: "" }];
    await assert.rejects(client.addConversation({ userId, sessionId: "s2", turns }), (error: unknown) => {
      assert.ok(error instanceof MemsvcError, `expected MemsvcError, got ${String(error)}`);
      assert.equal(error.code, GrpcStatus.INVALID_ARGUMENT);
      assert.deepEqual(
        error.fieldViolations.map((v) => v.field),
        ["turns[0].content"],
      );
      return true;
    });
  });

  if (tls?.cert) {
    test("over mutual TLS a client without a certificate, or in plaintext, is refused", async () => {
      assert.ok(client);
      for (const options of [{ tls: { ca: tls.ca } }, {}]) {
        const refused = new MemoryClient(address, apiKey, { deadlineMs: 10_000, ...options });
        await assert.rejects(refused.addMemories(userId, [{ content: "never stored" }]), (error: unknown) => {
          assert.ok(error instanceof MemsvcError, `expected MemsvcError, got ${String(error)}`);
          // In TLS 1.3 the server refuses a missing certificate after the client's side of the
          // handshake is done: Node's HTTP/2 session then closes the stream with CANCEL.
          assert.ok(
            error.code === GrpcStatus.UNAVAILABLE || error.code === GrpcStatus.CANCELLED,
            `${JSON.stringify(options)}: ${error.message}`,
          );
          return true;
        });
        refused.close();
      }
      for await (const memory of client.iterateMemories({ userId })) {
        assert.notEqual(memory.content, "never stored");
      }
    });
  }
});
