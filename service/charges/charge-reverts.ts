/**
 * A charge's revert explained before it is classified (charge-failures.ts): a token's blacklisting
 * names no address, so the token is asked whether it is the customer's wallet or the payee's, and a
 * token's pause is told apart from the customer's situation.
 */
import { Effect } from "effect";
import { tokenRefusal } from "../chains/blocked-transfers.ts";
import type { EscrowRevert } from "../chains/chain-clients.ts";
import type { ResolvedChain } from "../chains/config.ts";
import { TokenStates } from "../chains/token-states.ts";
import type { MandateRow } from "../mandates/mandate-object.ts";
import { type ChargeRevertOutcome, classifyChargeRevert } from "./charge-failures.ts";

/** The mandate's customer: its bound wallet, else the upper 160 bits of its escrow id. */
const customerOf = (mandate: MandateRow) =>
  (mandate.customer_address ?? `0x${(mandate.onchain_id ?? "").slice(2, 42)}`).toLowerCase();

export const explainChargeRevert = (
  chain: ResolvedChain,
  mandate: MandateRow,
  revert: EscrowRevert | undefined,
): Effect.Effect<ChargeRevertOutcome, never, TokenStates> =>
  Effect.gen(function* () {
    const refusal = tokenRefusal(revert);
    const context = { ...(revert?.reason === undefined ? {} : { reason: revert.reason }) };
    if (refusal === "paused") return classifyChargeRevert(revert?.errorName, { ...context, paused: true });
    if (refusal !== "blacklisted") return classifyChargeRevert(revert?.errorName, context);
    const states = yield* TokenStates;
    const customer = customerOf(mandate);
    const payee = mandate.payee_address.toLowerCase();
    const listed = yield* states
      .blacklisted(chain, mandate.token_address, [customer, payee])
      .pipe(Effect.orElseSucceed(() => new Set<string>()));
    return classifyChargeRevert(revert?.errorName, {
      ...context,
      ...(listed.has(customer)
        ? { blacklisted: "customer" as const }
        : listed.has(payee)
          ? { blacklisted: "payee" as const }
          : {}),
    });
  });
