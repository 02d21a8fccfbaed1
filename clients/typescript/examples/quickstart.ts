// Store what a user said, ask what matters for a question, and read an invalid request's errors.
// Run against a server: MEMSVC_API_KEY=$(cat .memsvc/dev-api-key) npm run example --workspace clients/typescript
import { Extractor, GrpcStatus, MemoryClient, MemsvcError, Role } from "@memsvc/client";

const address = process.env["MEMSVC_ADDRESS"] ?? process.env["MEMSVC_LISTEN"] ?? "127.0.0.1:50051";
const client = new MemoryClient(address, process.env["MEMSVC_API_KEY"] ?? "", {
  deadlineMs: 30_000, // per call, unless a call passes { timeoutMs }
  tls: false, // true, or Node.js TLS options such as { ca }
});
const userId = "ts-quickstart";
try {
  await client.addMemories(userId, [{ content: "My dog is called Biscuit.", importance: 0.9 }]);
  // A conversation's new turns: kept as evidence, with what they state extracted and linked.
  const said = await client.addConversation({
    userId,
    sessionId: "trip-planning",
    turns: [{ role: Role.USER, content: "I'm allergic to shellfish, so no oysters for me." }],
  });
  console.log("extracted:", said.extracted.map((m) => m.content), Extractor[said.extractor]);
  const { memories } = await client.query({ userId, query: "What can't I eat?", includeSources: true });
  for (const hit of memories) {
    console.log(hit.score.toFixed(2), hit.memory?.content, hit.sources.map((s) => s.content));
  }
  await client.addMemories(userId, [{ content: "" }]);
} catch (error) {
  if (error instanceof MemsvcError && error.code === GrpcStatus.INVALID_ARGUMENT) {
    console.log("invalid:", error.fieldViolations.map((v) => `${v.field}: ${v.description}`));
  } else {
    throw error;
  }
} finally {
  console.log(`erased ${await client.forgetUser(userId)} memories`);
  client.close();
}
