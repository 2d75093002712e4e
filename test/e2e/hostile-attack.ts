/**
 * Merchant A's attack in test/e2e/hostile-merchant.test.ts, run in a worker thread of its own: the
 * attacker is another client of the service, as it would be, not a share of the test process's event
 * loop, which the stack also runs the service on. Floods `/v1` with reads and payment creations at a
 * paced rate without waiting for answers, broadcasts A's signed transfers (each wallet's in nonce order)
 * and posts its gasless authorizations, all at once. The flood stops when the test posts "stop"; the
 * worker then posts back what it got, once every answer is in.
 */
import { randomUUID } from "node:crypto";
import { parentPort, workerData } from "node:worker_threads";
import { postAuthorization } from "./gasless-authorizations.ts";

export interface AttackPlan {
  readonly apiUrl: string;
  readonly key: string;
  readonly rpcUrl: string;
  /** Reads and payment creations each, requests a second. */
  readonly floodPerSecond: number;
  /** What each payment created by the flood asks. */
  readonly amountDecimal: string;
  /** Each wallet's signed transfers, in nonce order. */
  readonly transfers: ReadonlyArray<ReadonlyArray<string>>;
  /** Gasless authorizations: the payment's page and the signed body. */
  readonly authorizations: ReadonlyArray<{ readonly url: string; readonly body: unknown }>;
}

/** An answer as the test counts it: its status (0: none came) and its body. */
export interface Answer {
  readonly status: number;
  readonly json?: unknown;
}

export interface AttackOutcome {
  readonly seconds: number;
  readonly reads: ReadonlyArray<Answer>;
  readonly writes: ReadonlyArray<Answer>;
  /** In the order of the plan's authorizations. */
  readonly gasless: ReadonlyArray<Answer>;
}

/**
 * A flood request the service never answered (the connection timed out or was reset): past what two
 * shared cores serve, the attacker's own connections wait in the listen queue until it overflows.
 */
const NO_ANSWER: Answer = { status: 0 };

const request = async (url: string, key: string, body?: unknown): Promise<Answer> => {
  try {
    const response = await fetch(url, {
      method: body === undefined ? "GET" : "POST",
      headers: {
        authorization: `Bearer ${key}`,
        ...(body === undefined
          ? {}
          : { "content-type": "application/json", "idempotency-key": randomUUID() }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await response.text();
    return { status: response.status, json: text === "" ? undefined : JSON.parse(text) };
  } catch {
    return NO_ANSWER;
  }
};

/** `send` `perSecond` times a second without waiting for the answers, while `going()`; then every answer. */
const paced = async (perSecond: number, going: () => boolean, send: () => Promise<Answer>) => {
  const started = Date.now();
  const sent: Promise<Answer>[] = [];
  for (let i = 1; going(); i++) {
    sent.push(send());
    await new Promise((resolve) =>
      setTimeout(resolve, Math.max(0, started + (i * 1000) / perSecond - Date.now())),
    );
  }
  return Promise.all(sent);
};

const sendRaw = async (rpcUrl: string, raw: string) => {
  const response = await fetch(rpcUrl, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_sendRawTransaction", params: [raw] }),
  });
  const answer = (await response.json()) as { error?: { message?: string } };
  if (answer.error !== undefined) throw new Error(`a transfer was refused: ${answer.error.message}`);
};

const attack = async (plan: AttackPlan): Promise<AttackOutcome> => {
  let going = true;
  parentPort?.once("message", () => {
    going = false;
  });
  const started = Date.now();
  const flood = Promise.all([
    paced(
      plan.floodPerSecond,
      () => going,
      () => request(`${plan.apiUrl}/v1/chains`, plan.key),
    ),
    paced(
      plan.floodPerSecond,
      () => going,
      () => request(`${plan.apiUrl}/v1/payments`, plan.key, { amount_decimal: plan.amountDecimal }),
    ),
  ]);
  const transfers = Promise.all(
    plan.transfers.map(async (raws) => {
      for (const raw of raws) await sendRaw(plan.rpcUrl, raw);
    }),
  );
  const gasless = Promise.all(
    plan.authorizations.map(async ({ url, body }) => {
      const { status, json } = await postAuthorization(url, body).catch(() => NO_ANSWER);
      return { status, json };
    }),
  );
  const [reads, writes] = await flood;
  const seconds = (Date.now() - started) / 1000;
  await transfers;
  return { seconds, reads, writes, gasless: await gasless };
};

parentPort?.postMessage(await attack(workerData as AttackPlan));
