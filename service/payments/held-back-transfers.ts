/**
 * A payment's sweep or release that the chain refused alone (chains/blocked-transfers.ts), shared by the
 * sweeper and the payment releaser: the items refused are held back, each episode raises one
 * `payment.sweep_failed` / `payment.release_failed`, and an item whose blacklisted address was cleared
 * is due again at once.
 */
import { Effect } from "effect";
import { nextAttemptAt, type TransferFailure } from "../chains/blocked-transfers.ts";
import type { ResolvedChain } from "../chains/config.ts";
import { TokenStates } from "../chains/token-states.ts";
import { Outbox } from "../events/outbox.ts";
import type { PaymentRow } from "./payment-object.ts";
import { PaymentRender } from "./payment-render.ts";
import { PaymentStore } from "./payment-store.ts";

export type HeldBackTransfer = "sweep" | "release";

/** Held-back items whose blacklisted address the token no longer lists are due at `at`. */
export const retryCleared = (chain: ResolvedChain, what: HeldBackTransfer, at: Date) =>
  Effect.gen(function* () {
    const store = yield* PaymentStore;
    const states = yield* TokenStates;
    const named = (yield* store.heldBack(chain.id, what, at)).flatMap((row) =>
      row.code === "payout_address_blocked"
        ? [{ id: row.id, token: row.token_address, address: row.payee_address }]
        : row.code === "deposit_address_blocked"
          ? [{ id: row.id, token: row.token_address, address: row.deposit_address }]
          : [],
    );
    const cleared: string[] = [];
    for (const token of new Set(named.map((n) => n.token))) {
      const ofToken = named.filter((n) => n.token === token);
      const listed = yield* states.blacklisted(
        chain,
        token,
        ofToken.map((n) => n.address),
      );
      cleared.push(...ofToken.filter((n) => !listed.has(n.address)).map((n) => n.id));
    }
    yield* store.retryAt(what, cleared, at);
  }).pipe(Effect.catchTag("ChainUnavailable", () => Effect.void));

/** Holds `row`'s sweep or release back after a refusal at `at`; the first of an episode raises its event. */
export const holdBack = (row: PaymentRow, what: HeldBackTransfer, failure: TransferFailure, at: Date) =>
  Effect.gen(function* () {
    const store = yield* PaymentStore;
    const render = yield* PaymentRender;
    const outbox = yield* Outbox;
    const ongoing = what === "sweep" ? row.sweep_failed_since : row.release_failed_since;
    const since = ongoing ?? at;
    const retryAt = new Date(nextAttemptAt(since.getTime(), at.getTime()));
    if (what === "sweep") yield* store.recordSweepFailed(row.id, failure, since, retryAt);
    else yield* store.recordReleaseFailed(row.id, failure, since, retryAt);
    yield* Effect.logWarning(`payment ${what} refused; held back`).pipe(
      Effect.annotateLogs({ chain: row.chain_id, payment: row.id, code: failure.code }),
    );
    if (ongoing !== null) return;
    yield* outbox.raise({
      merchantId: row.merchant_id,
      livemode: row.livemode,
      type: what === "sweep" ? "payment.sweep_failed" : "payment.release_failed",
      object: yield* render.render(yield* store.reload(row.id)),
      key: `${row.id}:${what}_failed:${since.getTime()}`,
    });
  });
