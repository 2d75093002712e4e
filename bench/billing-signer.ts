/**
 * The billing bench's signing, off the main thread (which also runs the service under test): customers'
 * keys and addresses, and each customer's EIP-712 signatures of the
 * hosted page's terms and permit. `startSigners` runs this file in worker threads; each worker answers
 * one request at a time.
 */
import { isMainThread, parentPort, Worker } from "node:worker_threads";
import type { Hex } from "viem";
import type { PageTypedData } from "../test/contract/harness.ts";
import { newCustomer, signTerms } from "./customer-wallets.ts";

export type SignRequest =
  | { readonly kind: "customers"; readonly count: number }
  | {
      readonly kind: "terms";
      readonly key: Hex;
      readonly address: Hex;
      readonly terms: PageTypedData;
      readonly permit: PageTypedData | null;
    };

const answer = async (request: SignRequest): Promise<unknown> => {
  switch (request.kind) {
    case "customers":
      return Array.from({ length: request.count }, newCustomer);
    case "terms":
      return signTerms(request, request.terms, request.permit);
  }
};

if (!isMainThread && parentPort) {
  const port = parentPort;
  port.on("message", (message: { id: number; request: SignRequest }) => {
    answer(message.request).then(
      (result) => port.postMessage({ id: message.id, result }),
      (error: unknown) => port.postMessage({ id: message.id, error: String(error) }),
    );
  });
}

export interface Signers {
  readonly sign: <A>(request: SignRequest) => Promise<A>;
  readonly stop: () => Promise<void>;
}

/** `count` worker threads; requests go to the least busy one. */
export const startSigners = (count: number): Signers => {
  const workers = Array.from({ length: count }, () => ({
    worker: new Worker(new URL(import.meta.url)),
    busy: 0,
  }));
  const waiting = new Map<number, { resolve: (value: unknown) => void; reject: (error: Error) => void }>();
  let next = 0;
  for (const entry of workers) {
    entry.worker.unref();
    entry.worker.on("message", (message: { id: number; result?: unknown; error?: string }) => {
      entry.busy--;
      const pending = waiting.get(message.id);
      waiting.delete(message.id);
      if (message.error !== undefined) pending?.reject(new Error(message.error));
      else pending?.resolve(message.result);
    });
  }
  return {
    sign: <A>(request: SignRequest) =>
      new Promise<A>((resolve, reject) => {
        const id = next++;
        const entry = workers.reduce((a, b) => (b.busy < a.busy ? b : a));
        entry.busy++;
        waiting.set(id, { resolve: resolve as (value: unknown) => void, reject });
        entry.worker.postMessage({ id, request });
      }),
    stop: async () => {
      await Promise.all(workers.map(({ worker }) => worker.terminate()));
    },
  };
};
