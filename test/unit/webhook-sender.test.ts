/**
 * What the sender keeps of an answer: the first characters up to its limit, whether the answer declares
 * its length (read whole) or not (read chunk by chunk up to the cap), each twice (the pool reused).
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { describe, expect, it } from "vitest";
import { makeAttemptSender, PRIVATE_RESPONSE_BODY_LIMIT } from "../../service/webhooks/sender.ts";

const answers: Record<string, { readonly body: string; readonly declared: boolean }> = {
  "/small": { body: "ok", declared: true },
  "/utf8": { body: "é€".repeat(150), declared: true },
  "/chunked": { body: "y".repeat(40_000), declared: false },
  "/chunked-small": { body: "ok", declared: false },
  "/large": { body: "z".repeat(40_000), declared: true },
  "/empty": { body: "", declared: true },
};

describe("attempt sender: the answer kept", () => {
  it("keeps the answer's first characters up to the limit, declared length or not", async () => {
    const server = createServer((request, response) => {
      const answer = answers[request.url ?? ""] ?? { body: "", declared: true };
      if (answer.declared) response.setHeader("content-length", Buffer.byteLength(answer.body));
      else response.write(answer.body.slice(0, 100));
      response.statusCode = 200;
      response.end(answer.declared ? answer.body : answer.body.slice(100));
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as AddressInfo;
    const sender = makeAttemptSender({ timeoutMs: 5000, connectionsPerOrigin: 1 });
    try {
      for (const round of [1, 2])
        for (const [path, answer] of Object.entries(answers)) {
          const outcome = await sender.send({
            url: `http://127.0.0.1:${port}${path}`,
            body: "{}",
            headers: { "content-type": "application/json" },
            allowPrivate: true,
          });
          expect(outcome, `${path} #${round}`).toMatchObject({
            ok: true,
            statusCode: 200,
            error: null,
            responseBody: answer.body === "" ? null : answer.body.slice(0, PRIVATE_RESPONSE_BODY_LIMIT),
          });
        }
    } finally {
      await sender.destroy();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
