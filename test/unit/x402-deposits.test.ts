/**
 * client/x402-deposits.ts: a payTo made per request is the deposit address the escrow's terms give with
 * the id it sends along; payTo and price of one request agree, a new request gets a new id, and a paid
 * retry keeps the id its authorization was signed for (anything else in the header is ignored).
 */
import type { FacilitatorClient, HTTPAdapter, HTTPRequestContext } from "@x402/core/http";
import type { AssetAmount } from "@x402/core/types";
import fc from "fast-check";
import { getAddress, type Hex } from "viem";
import { describe, expect, it } from "vitest";
import { X402Deposits } from "../../client/x402-deposits.ts";
import { depositAddress } from "../../service/payments/deposit-address.ts";

const NETWORK = "eip155:8453" as const;
const terms = {
  escrow: "0x1111111111111111111111111111111111111111",
  payee: "0x2222222222222222222222222222222222222222",
  operator: "0x3333333333333333333333333333333333333333",
  holdSeconds: 604_800,
} as const;
const USDC = getAddress("0x833589fcd6edb6e08f4c7c32d4f71b54bda02913");

const facilitator = (kinds: ReadonlyArray<Record<string, unknown>>) =>
  ({
    getSupported: async () => ({ kinds, extensions: [], signers: {} }),
  }) as unknown as FacilitatorClient;

const contextOf = (paymentHeader?: string): HTTPRequestContext => ({
  adapter: {} as HTTPAdapter,
  path: "/quote",
  method: "GET",
  ...(paymentHeader === undefined ? {} : { paymentHeader }),
});

const headerOf = (accepted: unknown) => btoa(JSON.stringify({ x402Version: 2, accepted }));

const load = () =>
  X402Deposits.load(
    facilitator([
      { x402Version: 2, scheme: "exact", network: NETWORK, extra: { depositTerms: terms } },
      { x402Version: 2, scheme: "mandate", network: NETWORK },
    ]),
  );

const option = async () =>
  (await load()).exact({
    network: NETWORK,
    price: { amount: "10000", asset: USDC, extra: { name: "USD Coin", version: "2" } },
    maxTimeoutSeconds: 300,
  });

const resolved = async (accepts: Awaited<ReturnType<typeof option>>, context: HTTPRequestContext) => {
  const payTo = typeof accepts.payTo === "function" ? await accepts.payTo(context) : accepts.payTo;
  const price = (
    typeof accepts.price === "function" ? await accepts.price(context) : accepts.price
  ) as AssetAmount;
  return { payTo, price, id: price.extra?.escrowPaymentId as Hex };
};

const expectedPayTo = (id: Hex) =>
  getAddress(
    depositAddress(terms.escrow, {
      paymentId: id,
      payee: terms.payee,
      token: USDC,
      operator: terms.operator,
      holdSeconds: BigInt(terms.holdSeconds),
    }),
  );

describe("X402Deposits", () => {
  it("gives each unpaid request a new deposit address, the one its escrowPaymentId gives", async () => {
    const accepts = await option();
    expect(accepts).toMatchObject({ scheme: "exact", network: NETWORK, maxTimeoutSeconds: 300 });
    const first = await resolved(accepts, contextOf());
    const second = await resolved(accepts, contextOf());
    expect(first.id).toMatch(/^0x[0-9a-f]{64}$/);
    expect(second.id).not.toBe(first.id);
    expect(first.payTo).toBe(expectedPayTo(first.id));
    expect(second.payTo).toBe(expectedPayTo(second.id));
    expect(first.price).toEqual({
      amount: "10000",
      asset: USDC,
      extra: { name: "USD Coin", version: "2", escrowPaymentId: first.id },
    });
  });

  it("keeps the id a paid retry was signed for, and ignores a header that names none", async () => {
    const accepts = await option();
    await fc.assert(
      fc.asyncProperty(fc.uint8Array({ minLength: 32, maxLength: 32 }), async (bytes) => {
        const id = `0x${Buffer.from(bytes).toString("hex")}` as Hex;
        const retry = await resolved(
          accepts,
          contextOf(
            headerOf({ network: NETWORK, extra: { escrowPaymentId: id.toUpperCase().replace("0X", "0x") } }),
          ),
        );
        expect(retry.id).toBe(id);
        expect(retry.payTo).toBe(expectedPayTo(id));
      }),
      { numRuns: 50 },
    );
    const id = `0x${"ab".repeat(32)}`;
    for (const header of [
      "not base64 json",
      headerOf({ network: "eip155:1", extra: { escrowPaymentId: id } }),
      headerOf({ network: NETWORK, extra: { escrowPaymentId: "0x1234" } }),
      headerOf({ network: NETWORK }),
      headerOf(null),
    ]) {
      const answer = await resolved(accepts, contextOf(header));
      expect(answer.id, header).not.toBe(id);
      expect(answer.id, header).toMatch(/^0x[0-9a-f]{64}$/);
      expect(answer.payTo).toBe(expectedPayTo(answer.id));
    }
  });

  it("refuses a network the facilitator lists no deposit terms for", async () => {
    const deposits = await X402Deposits.load(
      facilitator([
        { x402Version: 2, scheme: "exact", network: "eip155:1" },
        {
          x402Version: 2,
          scheme: "exact",
          network: "eip155:10",
          extra: { depositTerms: { ...terms, payee: "0x12" } },
        },
      ]),
    );
    for (const network of ["eip155:1", "eip155:10", NETWORK] as const)
      expect(() => deposits.exact({ network, price: { amount: "1", asset: USDC } })).toThrow(
        /no deposit terms/,
      );
  });
});
