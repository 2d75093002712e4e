/** The dev merchant's calls to a benchmark's stack: JSON in and out, a fresh idempotency key per POST. */
import type { RunningStack } from "../scripts/stack/stack.ts";

export const stackApi =
  (stack: Pick<RunningStack, "apiUrl" | "devMerchant">) =>
  async (path: string, body?: unknown): Promise<Record<string, unknown>> => {
    const response = await fetch(`${stack.apiUrl}${path}`, {
      method: body === undefined ? "GET" : "POST",
      headers: {
        authorization: `Bearer ${stack.devMerchant.apiKey}`,
        ...(body === undefined
          ? {}
          : { "content-type": "application/json", "idempotency-key": crypto.randomUUID() }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const json = (await response.json()) as Record<string, unknown>;
    if (!response.ok) throw new Error(`${path}: ${response.status} ${JSON.stringify(json)}`);
    return json;
  };
