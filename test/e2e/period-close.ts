/**
 * The period close checked against the chain: every month of a merchant's activity, in a time zone, has
 * `opening + held in − released − returned = closing` per chain and token, one month's closing is the
 * next one's opening, and each flow equals the sum of the token's `Transfer` logs of that kind whose
 * block time falls in the month (read with viem, never from our tables).
 */
import { erc20Abi, type Hex } from "viem";
import { expect } from "vitest";
import type { components } from "../../client/openapi.ts";
import type { chainDriver } from "./chain-driver.ts";
import type { merchantOnTestChain } from "./helpers.ts";

type Merchant = Awaited<ReturnType<typeof merchantOnTestChain>>;
type Chain = ReturnType<typeof chainDriver>;

type PeriodReport = components["schemas"]["PeriodReport"];

const monthIn = (seconds: number, zone: string) => {
  const parts = new Intl.DateTimeFormat("en-CA", { timeZone: zone, year: "numeric", month: "2-digit" })
    .formatToParts(new Date(seconds * 1000))
    .reduce<Record<string, string>>((all, part) => Object.assign(all, { [part.type]: part.value }), {});
  return `${parts.year}-${parts.month}`;
};
const nextMonth = (month: string) => {
  const [year, number] = month.split("-").map(Number) as [number, number];
  return number === 12 ? `${year + 1}-01` : `${year}-${String(number + 1).padStart(2, "0")}`;
};
const big = (value: string | undefined) => BigInt(value ?? "0");

/**
 * Checks every month from the merchant's first movement to its last in `zone`; `customers` are the
 * merchant's customers' addresses (the senders of its charges). Returns the reports.
 */
export const checkPeriodClose = async (m: Merchant, chain: Chain, zone: string, customers: Hex[]) => {
  const txns: Array<{ created: number }> = [];
  for (let after = ""; ; ) {
    const page = await m.call(`/v1/balance_transactions?limit=100${after ? `&starting_after=${after}` : ""}`);
    txns.push(...page.json.data);
    if (!page.json.has_more) break;
    after = page.json.data.at(-1).id;
  }
  expect(txns.length).toBeGreaterThan(0);
  const times = txns.map((t) => t.created);
  const last = monthIn(Math.max(...times), zone);

  const payee = m.payoutAddress.toLowerCase();
  const escrow = chain.escrow.toLowerCase();
  const senders = new Set(customers.map((c) => c.toLowerCase()));
  const transfers = await chain.client.getContractEvents({
    address: chain.usdc,
    abi: erc20Abi,
    eventName: "Transfer",
    fromBlock: 0n,
  });
  const blockTimes = new Map<bigint, number>();
  const timed: Array<{ from: string; to: string; value: bigint; time: number }> = [];
  for (const log of transfers) {
    const from = String(log.args.from).toLowerCase();
    const to = String(log.args.to).toLowerCase();
    if (to !== payee && !(from === escrow && senders.has(to)) && !(to === escrow && senders.has(from)))
      continue;
    if (!blockTimes.has(log.blockNumber))
      blockTimes.set(
        log.blockNumber,
        Number((await chain.client.getBlock({ blockNumber: log.blockNumber })).timestamp),
      );
    timed.push({ from, to, value: log.args.value ?? 0n, time: blockTimes.get(log.blockNumber) ?? 0 });
  }

  const reports: PeriodReport[] = [];
  let opening = 0n;
  for (let month = monthIn(Math.min(...times), zone); ; month = nextMonth(month)) {
    const response = await m.call(`/v1/reports/period?month=${month}&time_zone=${encodeURIComponent(zone)}`);
    expect(response.status, response.text).toBe(200);
    const report = response.json as PeriodReport;
    reports.push(report);
    expect(monthIn(report.period_start, zone)).toBe(month);
    expect(monthIn(report.period_end - 1, zone)).toBe(month);
    const row = report.balances.find(
      (b) => b.chain === 31337 && b.token_address === chain.usdc.toLowerCase(),
    );
    const inMonth = timed.filter((t) => t.time >= report.period_start && t.time < report.period_end);
    const total = (match: (t: (typeof timed)[number]) => boolean) =>
      inMonth.filter(match).reduce((sum, t) => sum + t.value, 0n);
    const flows = {
      opening: big(row?.opening_pending),
      heldIn: big(row?.charges_held) + big(row?.payments_held),
      released: big(row?.released),
      returned: big(row?.returned),
      closing: big(row?.closing_pending),
      unheld: big(row?.charges_unheld) + big(row?.payments_unheld),
      availableIn: big(row?.available_in),
    };
    expect(flows.opening, month).toBe(opening);
    expect(flows.opening + flows.heldIn - flows.released - flows.returned, month).toBe(flows.closing);
    expect(flows.availableIn, month).toBe(flows.released + flows.unheld);
    // Tied to the chain: what reached the payout address, what went into and out of the escrow.
    expect(flows.availableIn, `${month} available`).toBe(total((t) => t.to === payee));
    expect(flows.released, `${month} released`).toBe(total((t) => t.from === escrow && t.to === payee));
    expect(flows.heldIn, `${month} held`).toBe(total((t) => t.to === escrow));
    expect(flows.returned, `${month} returned`).toBe(total((t) => t.from === escrow && t.to !== payee));
    opening = flows.closing;
    if (month === last) break;
  }
  return reports;
};
