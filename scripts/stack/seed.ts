/**
 * The local stack's test merchant: created once, with a test API key (DEV_API_KEY when set) and
 * every local test chain configured with anvil's second account as payout address.
 */
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { Effect, Exit } from "effect";
import { ApiKeys } from "../../service/auth/api-keys.ts";
import { MerchantChains } from "../../service/chains/merchant-chains.ts";
import { ChainRegistry } from "../../service/chains/registry.ts";
import type { ServiceConfig } from "../../service/config/env.ts";
import { domainLayer } from "../../service/main.ts";
import { Merchants } from "../../service/merchants/merchants.ts";

/** anvil's second default account. */
export const LOCAL_PAYOUT_ADDRESS = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8";

export interface DevMerchant {
  readonly merchantId: string;
  readonly apiKey: string;
}

export const seedDevMerchant = (config: ServiceConfig, file: string, devApiKey: string | undefined) =>
  Effect.gen(function* () {
    const merchants = yield* Merchants;
    const keys = yield* ApiKeys;
    const merchantChains = yield* MerchantChains;
    const saved = existsSync(file) ? (JSON.parse(readFileSync(file, "utf8")) as DevMerchant) : undefined;
    const existing = (yield* merchants.list).find((m) => m.id === saved?.merchantId);
    const merchantId = existing?.id ?? (yield* merchants.create("Local dev merchant")).id;

    const wanted = devApiKey ?? saved?.apiKey;
    let apiKey: string;
    const known =
      wanted === undefined ? undefined : yield* Effect.exit(keys.authenticate(`Bearer ${wanted}`));
    if (
      wanted !== undefined &&
      known !== undefined &&
      Exit.isSuccess(known) &&
      known.value.merchantId === merchantId
    ) {
      apiKey = wanted;
    } else {
      apiKey = (yield* keys.create({
        merchantId,
        livemode: false,
        ...(devApiKey ? { secret: devApiKey } : {}),
      })).secret;
    }
    const caller = { merchantId, apiKeyId: "", livemode: false };
    const configured = yield* merchantChains.list(caller);
    if (configured.length === 0) {
      const registry = yield* ChainRegistry;
      for (const chain of registry.forMode(false))
        yield* merchantChains.configure(caller, { chain: chain.id, payout_address: LOCAL_PAYOUT_ADDRESS });
    }
    const seeded: DevMerchant = { merchantId, apiKey };
    writeFileSync(file, `${JSON.stringify(seeded, null, 2)}\n`);
    return seeded;
  }).pipe(Effect.provide(domainLayer(config)));
