/**
 * Whole-system property (fast-check, on the real stack): random subscriptions (start days including
 * 29, 30 and 31; random prices, coupons, caps and metered usage) and random clock advances. Every
 * subscription is invoiced exactly once for every period it was active in, no invoice exceeds its
 * mandate's cap, each charge is for its invoice's period, and each subscription's paid invoices sum to
 * what the escrow's Charged logs say the chain took from its customer.
 */
import { readFileSync } from "node:fs";
import fc from "fast-check";
import { createPublicClient, type Hex, http, parseEventLogs } from "viem";
import { describe, expect, it } from "vitest";
import { MandateEscrowAbi } from "../../abis/MandateEscrow.ts";
import { waitFor } from "../../scripts/stack/wait.ts";
import type { ResolvedChain } from "../../service/chains/config.ts";
import { periodIndexAt } from "../../src/ledger/period.ts";
import { merchantOnTestChain, query, stack } from "./helpers.ts";

const DAY = 86_400;

const cents = (n: number) => (n / 100).toFixed(2);

const Subscription = fc.record({
  day: fc.oneof(fc.constantFrom(29, 30, 31), fc.integer({ min: 1, max: 28 })),
  priceCents: fc.integer({ min: 100, max: 5_000 }),
  coupon: fc.option(
    fc.oneof(
      fc.record({ percent_off: fc.integer({ min: 1, max: 100 }), months: fc.integer({ min: 1, max: 3 }) }),
      fc.record({
        amount_off_cents: fc.integer({ min: 1, max: 6_000 }),
        months: fc.integer({ min: 1, max: 3 }),
      }),
    ),
    { nil: undefined },
  ),
  capExtraCents: fc.integer({ min: 0, max: 2_000 }),
  usage: fc.option(
    fc.record({ unitCents: fc.integer({ min: 1, max: 100 }), quantity: fc.integer({ min: 1, max: 40 }) }),
    { nil: undefined },
  ),
});
// At most 27 days per step: no period (28 days or more) is skipped, so every period is billed.
const Advances = fc.array(fc.integer({ min: 1, max: 27 }), { minLength: 1, maxLength: 4 });

const escrowClient = () => {
  const chains = (JSON.parse(readFileSync(stack().chainsFile, "utf8")) as { chains: ResolvedChain[] }).chains;
  const chain = chains.find((c) => c.id === 31337) as ResolvedChain;
  return { client: createPublicClient({ transport: http(chain.rpc.http[0]) }), escrow: chain.escrow.address };
};

/** The next chain time at or after `now` whose UTC day of the month is `day` (never backwards). */
const nextDay = (now: number, day: number) => {
  for (let t = now; ; t += DAY) if (new Date(t * 1000).getUTCDate() === day) return t;
};

describe("subscription billing properties", () => {
  it("bills every period exactly once, never above the cap, and the invoices equal the chain's charges", async () => {
    const { client, escrow } = escrowClient();
    await fc.assert(
      fc.asyncProperty(
        fc.array(Subscription, { minLength: 1, maxLength: 3 }),
        Advances,
        async (specs, advances) => {
          const m = await merchantOnTestChain();
          let now = (await m.advance(1)).json.now as number;
          const subs: Array<{ id: string; mandate: string; anchor: number; cap: number }> = [];
          for (const spec of specs) {
            const target = nextDay(now + 60, spec.day);
            now = (await m.advance(target - now + 60)).json.now as number;
            const price = await m.call("/v1/prices", {
              product_name: "P",
              amount_decimal: cents(spec.priceCents),
              ...(spec.usage
                ? { usage: { unit_amount_decimal: cents(spec.usage.unitCents), unit: "u" } }
                : {}),
            });
            const coupon = spec.coupon
              ? await m.call(
                  "/v1/coupons",
                  "percent_off" in spec.coupon
                    ? { percent_off: spec.coupon.percent_off, duration_in_months: spec.coupon.months }
                    : {
                        amount_off_decimal: cents(spec.coupon.amount_off_cents),
                        token: "USDC",
                        duration_in_months: spec.coupon.months,
                      },
                )
              : undefined;
            const capCents = spec.priceCents + spec.capExtraCents;
            const created = await m.call("/v1/subscriptions", {
              customer: "cus_p",
              price: price.json.id,
              cap_decimal: cents(capCents),
              ...(coupon ? { coupon: coupon.json.id } : {}),
            });
            expect(created.status, created.text).toBe(200);
            const sub = created.json;
            const mandate = (await m.call(`/v1/mandates/${sub.mandate}`)).json;
            expect(new Date(mandate.anchor * 1000).getUTCDate()).toBe(spec.day);
            await m.call(`/v1/test/mandates/${sub.mandate}/fund`, { amount_decimal: "1000" });
            expect((await m.call(`/v1/test/mandates/${sub.mandate}/authorize`, {})).status).toBe(200);
            if (spec.usage)
              await m.call(`/v1/subscriptions/${sub.id}/usage_records`, { quantity: spec.usage.quantity });
            subs.push({ id: sub.id, mandate: sub.mandate, anchor: mandate.anchor, cap: capCents * 10_000 });
          }

          const settled = async () => {
            for (const sub of subs) {
              const period = periodIndexAt(sub.anchor, now) ?? 0;
              const [row] = await query<{ status: string }>(
                "SELECT status FROM billing.invoices WHERE subscription_id = $1 AND period = $2",
                [sub.id, period],
              );
              if (row?.status !== "paid") return false;
            }
            return true;
          };
          await waitFor(settled, { timeoutMs: 60_000, what: "first invoices paid" });
          for (const days of advances) {
            now = (await m.advance(days * DAY)).json.now as number;
            await waitFor(settled, { timeoutMs: 60_000, what: `billing after ${days} days` });
          }

          for (const sub of subs) {
            const last = periodIndexAt(sub.anchor, now) ?? 0;
            const invoices = await query<{
              period: number;
              total: string;
              status: string;
              charge_period: number;
            }>(
              `SELECT i.period, i.total::text AS total, i.status, c.period AS charge_period FROM billing.invoices i
             LEFT JOIN billing.charges c ON c.id = i.charge_id WHERE i.subscription_id = $1 ORDER BY i.period`,
              [sub.id],
            );
            expect(invoices.map((i) => i.period)).toEqual(Array.from({ length: last + 1 }, (_, k) => k));
            for (const invoice of invoices) {
              expect(invoice.status).toBe("paid");
              expect(BigInt(invoice.total)).toBeLessThanOrEqual(BigInt(sub.cap));
              if (invoice.total !== "0") expect(invoice.charge_period).toBe(invoice.period);
            }
            const [mandate] = await query<{ onchain_id: Hex }>(
              "SELECT onchain_id FROM billing.mandates WHERE id = $1",
              [sub.mandate],
            );
            const logs = parseEventLogs({
              abi: MandateEscrowAbi,
              eventName: "Charged",
              logs: await client.getLogs({
                address: escrow,
                topics: [null, mandate?.onchain_id as Hex],
                fromBlock: 0n,
                toBlock: "latest",
              } as never),
            }).filter((log) => log.args.mandateId === mandate?.onchain_id);
            const onchain = logs.reduce((sum, log) => sum + log.args.amount, 0n);
            const invoiced = invoices.reduce((sum, i) => sum + BigInt(i.total), 0n);
            expect(onchain).toBe(invoiced);
            expect(logs.map((log) => log.args.period).sort((a, b) => a - b)).toEqual(
              invoices.filter((i) => i.total !== "0").map((i) => i.period),
            );
          }
        },
      ),
      { numRuns: 4, endOnFailure: true },
    );
  }, 600_000);
});
