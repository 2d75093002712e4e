/**
 * The pay page without a browser or a chain: the pure checks and links of a gasless payment
 * (payments/transfer-authorization.ts), the client's encodings, wording and state machine, the flow
 * against a fake wallet and service, and the server routes (HTML, CSP, 404, bundled assets).
 * The real browser and chain run in test/e2e/pay-page.test.ts.
 */
import { Hono } from "hono";
import { encodeFunctionData, erc20Abi, type Hex, verifyTypedData } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { describe, expect, it } from "vitest";
import { discoverWallets } from "../../service/http/hosted-page/client/wallets.ts";
import { tokenOfPath } from "../../service/http/page-rate-limit.ts";
import { ApiError } from "../../service/http/pay-page/client/api.ts";
import { AUTHORIZATION_VALIDITY_SECONDS, createFlow } from "../../service/http/pay-page/client/flow.ts";
import {
  isZero,
  randomNonce,
  timeLeftText,
  transferCalldata,
} from "../../service/http/pay-page/client/format.ts";
import { initialState, payStatus, reduce, type State } from "../../service/http/pay-page/client/state.ts";
import type { AuthorizationRequest, Session } from "../../service/http/pay-page/client/types.ts";
import { viewModel } from "../../service/http/pay-page/client/view-model.ts";
import { registerPayPage } from "../../service/http/pay-page/routes.ts";
import {
  acceptsPayment,
  amountOverpaid,
  amountToSend,
  authorizationProblem,
  erc681TransferUri,
  type TransferAuthorization,
  transferAuthorizationTypedData,
} from "../../service/payments/transfer-authorization.ts";
import { DEPOSIT, NOW, paySession, TOKEN_ADDRESS } from "./pay-session.ts";

const PAYER = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8";
const baseSession = paySession;

const partly: Partial<Session> = {
  status: "processing",
  amount_pending_decimal: "3",
  amount_remaining_decimal: "7",
  amount_remaining: "7000000",
  transfers: 1,
};

describe("gasless payment checks (pure)", () => {
  const row = (amount: string, received: string, seen: string) => ({ amount, received, seen });

  it("says what is left to send and what was overpaid, counting unconfirmed arrivals", () => {
    expect(amountToSend(row("10", "0", "0"))).toBe(10n);
    expect(amountToSend(row("10", "0", "3"))).toBe(7n);
    expect(amountToSend(row("10", "4", "3"))).toBe(3n);
    expect(amountToSend(row("10", "12", "0"))).toBe(0n);
    expect(amountOverpaid(row("10", "8", "3"))).toBe(1n);
    expect(amountOverpaid(row("10", "8", "0"))).toBe(0n);
  });

  it("takes payments until paid, canceled or reversed (an expired one still takes a late payment)", () => {
    expect(
      ["requires_payment", "processing", "expired", "underpaid"].every((s) => acceptsPayment(s as never)),
    ).toBe(true);
    expect(["paid", "canceled", "reversed"].some((s) => acceptsPayment(s as never))).toBe(false);
  });

  it("builds the EIP-681 transfer link", () => {
    expect(erc681TransferUri({ token: TOKEN_ADDRESS, chainId: 8453, to: DEPOSIT, units: 2_500_000n })).toBe(
      `ethereum:${TOKEN_ADDRESS}@8453/transfer?address=${DEPOSIT}&uint256=2500000`,
    );
  });

  const authorization = (overrides: Partial<TransferAuthorization> = {}): TransferAuthorization => ({
    from: PAYER,
    to: DEPOSIT,
    value: 7_000_000n,
    validAfter: 0n,
    validBefore: BigInt(NOW + 3600),
    nonce: `0x${"11".repeat(32)}`,
    ...overrides,
  });
  const payment = {
    depositAddress: DEPOSIT,
    toSend: 7_000_000n,
    decimalsText: (u: bigint) => String(u),
    symbol: "U",
  };

  it.each([
    [{}, undefined],
    [{ to: PAYER as Hex }, "payment_recipient_mismatch"],
    [{ to: DEPOSIT.toLowerCase() as Hex }, undefined],
    [{ value: 6_999_999n }, "payment_amount_too_low"],
    [{ value: 8_000_000n }, undefined],
    [{ validBefore: BigInt(NOW + 59) }, "authorization_expired"],
    [{ validBefore: BigInt(NOW + 60) }, undefined],
    [{ validAfter: BigInt(NOW) }, "authorization_not_yet_valid"],
    [{ validAfter: BigInt(NOW - 1) }, undefined],
  ] as const)("%o → %s", (overrides, code) => {
    expect(authorizationProblem(authorization(overrides), payment, NOW)?.code).toBe(code);
  });

  it("refuses when nothing is left to send", () => {
    expect(authorizationProblem(authorization(), { ...payment, toSend: 0n }, NOW)?.code).toBe(
      "payment_not_payable",
    );
  });

  it("verifies a wallet's signature of the typed data the page hands out", async () => {
    const account = privateKeyToAccount(generatePrivateKey());
    const domain = {
      name: "USD Coin",
      version: "2",
      chainId: 8453,
      verifyingContract: TOKEN_ADDRESS,
    } as const;
    const message = authorization({ from: account.address });
    const typed = transferAuthorizationTypedData(domain, message);
    const signature = await account.signTypedData(typed);
    expect(await verifyTypedData({ address: account.address, ...typed, signature })).toBe(true);
    expect(await verifyTypedData({ address: PAYER, ...typed, signature })).toBe(false);
  });
});

describe("client encodings and wording", () => {
  it("encodes an ERC-20 transfer like viem", () => {
    expect(transferCalldata(DEPOSIT, 7_000_000n)).toBe(
      encodeFunctionData({ abi: erc20Abi, functionName: "transfer", args: [DEPOSIT, 7_000_000n] }),
    );
    expect(() => transferCalldata("0x12", 1n)).toThrow();
  });

  it.each([
    [0, null],
    [-5, null],
    [59, "0:59"],
    [899.6, "14:59"],
    [3600, "1:00:00"],
    [3 * 86_400 + 5, "3 days"],
  ])("time left %d s → %s", (seconds, text) => {
    expect(timeLeftText(seconds)).toBe(text);
  });

  it("writes a 32-byte nonce in hex and reads zero decimals", () => {
    expect(randomNonce(new Uint8Array(32).fill(171))).toBe(`0x${"ab".repeat(32)}`);
    expect(() => randomNonce(new Uint8Array(4))).toThrow();
    expect(["0", "0.0", "0.000000"].every(isZero)).toBe(true);
    expect(["0.1", "10"].some(isZero)).toBe(false);
  });
});

const seen = (state: State, session: Partial<Session>, at = NOW) =>
  reduce(state, { type: "session", session: { ...baseSession, ...session }, at });

describe("state and view model", () => {
  const start = () => initialState(null, NOW);

  it("tells waiting, partly received, confirming, paid and the closed statuses apart", () => {
    expect(payStatus(baseSession)).toBe("waiting");
    expect(payStatus({ ...baseSession, ...partly })).toBe("partly_received");
    expect(
      payStatus({ ...baseSession, ...partly, amount_remaining_decimal: "0", amount_remaining: "0" }),
    ).toBe("confirming");
    expect(payStatus({ ...baseSession, status: "underpaid" })).toBe("underpaid");
  });

  it("shows the payment with its QR link, the gasless button and the expiry in chain time", () => {
    const state = seen(initialState(null, NOW - 100), {}, NOW - 100); // the page's clock is 100 s behind
    const view = viewModel(reduce(state, { type: "tick", at: NOW - 40 }));
    expect(view.title).toBe("Pay Acme");
    expect(view.amount).toBe("10 USDC");
    expect(view.deposit).toEqual({
      address: DEPOSIT,
      uri: baseSession.payment_uri,
      label: "Send 10 USDC on Local chain (anvil) to this address",
    });
    expect(view.expiry).toBe("Expires in 14:00");
    expect(view.action).toEqual({ kind: "pay_gasless", label: "Pay 10 USDC with your wallet" });
    expect(view.secondary?.kind).toBe("pay_transfer");
    expect(view.badge).toBe("Test mode");
    expect(view.summary).toContainEqual({ label: "For", value: "Order 42" });

    const plain = viewModel(seen(start(), { gasless: null }));
    expect(plain.action?.kind).toBe("pay_transfer");
    expect(plain.secondary).toBeNull();
    expect(plain.hint).toContain("gas in ETH");
  });

  it("keeps the chain's clock when it idles, and jumps with it when it moves on", () => {
    let state = seen(start(), {}, NOW);
    state = seen(state, {}, NOW + 30); // same chain time read 30 s later: no jump back
    expect(viewModel(reduce(state, { type: "tick", at: NOW + 30 })).expiry).toBe("Expires in 14:30");
    state = seen(state, { now: NOW + 1000 }, NOW + 31); // the test clock moved the chain on
    expect(viewModel(state).expiry).toBe("Time is up: this payment is expiring.");
  });

  it("shows part received with the remainder, then confirming, then paid with the overpayment", () => {
    let state = seen(start(), partly);
    let view = viewModel(state);
    expect(view.title).toBe("Partly received");
    expect(view.status).toBe("Partly received: 7 USDC left to pay.");
    expect(view.amount).toBe("7 USDC");
    expect(view.summary).toContainEqual({ label: "Not yet confirmed", value: "3 USDC" });

    state = seen(state, {
      ...partly,
      amount_pending_decimal: "10",
      amount_remaining_decimal: "0",
      amount_remaining: "0",
    });
    view = viewModel(state);
    expect(view.title).toBe("Confirming your payment");
    expect(view.deposit).toBeNull();
    expect(view.action).toBeNull();

    state = seen(state, {
      status: "paid",
      amount_received_decimal: "12",
      amount_remaining_decimal: "0",
      amount_overpaid_decimal: "2",
    });
    view = viewModel(state);
    expect(state.phase.tag).toBe("done");
    expect(view.title).toBe("Payment received");
    expect(view.lead).toBe(
      "Acme received 10 USDC. Thank you! You sent 2 USDC more than the amount; contact Acme about the difference.",
    );
    expect(view.countdown).toBeNull();
  });

  it.each([
    ["expired", "Payment expired"],
    ["underpaid", "Payment incomplete"],
    ["canceled", "Payment canceled"],
    ["reversed", "Payment reversed"],
  ] as const)("%s: %s, with nothing to pay", (status, title) => {
    const view = viewModel(seen(start(), { status }));
    expect(view.title).toBe(title);
    expect(view.deposit).toBeNull();
    expect(view.action).toBeNull();
    expect(view.expiry).toBeNull();
  });

  it("clears a wallet error once the payment moved on, and reports a failed gasless transfer", () => {
    const failedWallet = reduce(seen(start(), {}), {
      type: "failed",
      error: { kind: "no_wallet", title: "No wallet found", message: "…", retry: null },
    });
    expect(seen(failedWallet, {}).phase.tag).toBe("error");
    expect(seen(failedWallet, partly).phase.tag).toBe("open");

    const sent = reduce(seen(start(), {}), { type: "sent", kind: "gasless", hash: "0xaa" });
    expect(viewModel(sent).status).toBe("Payment sent. Waiting for it to arrive…");
    const failed = seen(sent, { gasless_transaction: { hash: "0xaa", status: "failed" } });
    expect(failed.phase.tag).toBe("error");
    expect(viewModel(failed).error?.title).toBe("Payment not confirmed");
    expect(failed.sent).toBeNull();
    const arrived = seen(sent, partly);
    expect(arrived.sent).toBeNull();
  });

  it("counts `close=1` down once paid; keep open stops it", () => {
    let state = seen(initialState(2, NOW), { status: "paid" });
    expect(viewModel(state).countdown).toBe("This tab will close in 2 seconds.");
    expect(viewModel(state).focus).toBe("action");
    state = reduce(state, { type: "tick", at: NOW + 1 });
    expect(viewModel(state).countdown).toBe("This tab will close in 1 second.");
    expect(viewModel(reduce(state, { type: "keep_open" })).countdown).toBeNull();
    state = reduce(state, { type: "tick", at: NOW + 2 });
    expect(viewModel(state).countdown).toBe("Closing this tab…");
  });
});

interface FakeOptions {
  readonly session?: Partial<Session>;
  readonly provider?: boolean;
  readonly chainId?: number;
  readonly rejectSignature?: boolean;
  readonly authorizeError?: ApiError;
  readonly receiptStatus?: string;
  readonly closeDelay?: number | null;
}

const harness = (options: FakeOptions = {}) => {
  const calls: Array<{ method: string; params?: readonly unknown[] }> = [];
  const posted: AuthorizationRequest[] = [];
  let session: Session = { ...baseSession, ...options.session };
  let chainId = options.chainId ?? 31337;
  let clock = NOW - 10;
  let closed = 0;
  const provider = {
    request: async ({ method, params }: { method: string; params?: readonly unknown[] }) => {
      calls.push({ method, ...(params ? { params } : {}) });
      switch (method) {
        case "eth_requestAccounts":
          return [PAYER];
        case "eth_chainId":
          return `0x${chainId.toString(16)}`;
        case "wallet_switchEthereumChain":
          chainId = Number((params?.[0] as { chainId: string } | undefined)?.chainId);
          return null;
        case "eth_signTypedData_v4":
          if (options.rejectSignature) throw Object.assign(new Error("User rejected"), { code: 4001 });
          return `0x${"12".repeat(65)}`;
        case "eth_sendTransaction":
          return "0xtx";
        case "eth_getTransactionReceipt":
          return { status: options.receiptStatus ?? "0x1" };
        default:
          throw new Error(`unexpected ${method}`);
      }
    },
  };
  const flow = createFlow(
    {
      api: {
        session: async () => session,
        authorize: async (request) => {
          posted.push(request);
          if (options.authorizeError) throw options.authorizeError;
          session = { ...session, gasless_transaction: { hash: "0xrelayed", status: "pending" } };
          return session;
        },
      },
      wallets: discoverWallets(
        Object.assign(new EventTarget(), options.provider === false ? {} : { ethereum: provider }),
      ),
      sleep: async () => undefined,
      now: () => clock,
      randomBytes: (n) => new Uint8Array(n).fill(7),
      closeWindow: () => {
        closed += 1;
      },
      receiptPollMs: 1,
      closeDelay: options.closeDelay ?? null,
    },
    () => undefined,
  );
  return {
    flow,
    calls,
    posted,
    methods: () => calls.map((c) => c.method),
    setSession: (next: Partial<Session>) => {
      session = { ...session, ...next };
    },
    advance: (seconds: number) => {
      clock += seconds;
    },
    closed: () => closed,
  };
};

describe("flow", () => {
  it("pays gasless: connects, switches the chain, signs the authorization of what is left, and posts it", async () => {
    const h = harness({ chainId: 1 });
    await h.flow.load();
    await h.flow.payGasless();
    expect(h.methods()).toEqual([
      "eth_requestAccounts",
      "eth_chainId",
      "wallet_switchEthereumChain",
      "eth_chainId",
      "eth_signTypedData_v4",
    ]);
    const [, json] = h.calls.find((c) => c.method === "eth_signTypedData_v4")?.params ?? [];
    const typed = JSON.parse(String(json)) as {
      primaryType: string;
      domain: unknown;
      message: Record<string, string>;
    };
    expect(typed.primaryType).toBe("TransferWithAuthorization");
    expect(typed.domain).toEqual(baseSession.gasless?.domain);
    const nonce = `0x${"07".repeat(32)}`;
    expect(typed.message).toEqual({
      from: PAYER,
      to: DEPOSIT,
      value: "10000000",
      validAfter: "0",
      // Chain time (the session's `now`), not the page's clock, which is 10 s behind.
      validBefore: String(NOW + AUTHORIZATION_VALIDITY_SECONDS),
      nonce,
    });
    expect(h.posted).toEqual([
      {
        from: PAYER,
        to: DEPOSIT,
        value: "10000000",
        valid_after: "0",
        valid_before: String(NOW + AUTHORIZATION_VALIDITY_SECONDS),
        nonce,
        signature: `0x${"12".repeat(65)}`,
      },
    ]);
    expect(viewModel(h.flow.state()).stage).toBe("sent");

    // The watcher saw it; then it is confirmed.
    h.setSession({
      ...partly,
      amount_pending_decimal: "10",
      amount_remaining_decimal: "0",
      amount_remaining: "0",
    });
    await h.flow.poll();
    expect(viewModel(h.flow.state()).stage).toBe("confirming");
    h.setSession({ status: "paid", amount_received_decimal: "10", amount_pending_decimal: "0" });
    await h.flow.poll();
    expect(h.flow.state().phase.tag).toBe("done");
  });

  it("says a refusal plainly and offers the transaction instead", async () => {
    const h = harness({
      authorizeError: new ApiError(
        400,
        "payer_balance_insufficient",
        "The wallet holds 2 USDC; the authorization moves 10 USDC.",
      ),
    });
    await h.flow.load();
    await h.flow.payGasless();
    const view = viewModel(h.flow.state());
    expect(view.error).toMatchObject({
      title: "Not enough USDC",
      message: "The wallet holds 2 USDC; the authorization moves 10 USDC.",
    });
    expect(view.action?.kind).toBe("retry");
    expect(view.secondary?.kind).toBe("pay_transfer");
  });

  it("reports a declined signature and a missing wallet", async () => {
    const declined = harness({ rejectSignature: true });
    await declined.flow.load();
    await declined.flow.payGasless();
    expect(viewModel(declined.flow.state()).error?.title).toBe("Signature declined");
    expect(declined.posted).toEqual([]);

    const none = harness({ provider: false });
    await none.flow.load();
    await none.flow.payGasless();
    expect(viewModel(none.flow.state()).error?.title).toBe("No wallet found");
  });

  it("pays with a transfer from the wallet: the remainder to the deposit address, then waits for it", async () => {
    const h = harness({ session: { ...partly, gasless: null } });
    await h.flow.load();
    await h.flow.payTransfer();
    const sent = h.calls.find((c) => c.method === "eth_sendTransaction")?.params?.[0];
    expect(sent).toEqual({ from: PAYER, to: TOKEN_ADDRESS, data: transferCalldata(DEPOSIT, 7_000_000n) });
    expect(h.flow.state().sent?.kind).toBe("transfer");

    const failed = harness({ session: { gasless: null }, receiptStatus: "0x0" });
    await failed.flow.load();
    await failed.flow.payTransfer();
    expect(viewModel(failed.flow.state()).error?.title).toBe("Transfer failed");
  });

  it("closes a paid page with `close=1&delay=0` at once, and says so when the browser refuses", async () => {
    const h = harness({ session: { status: "paid" }, closeDelay: 0 });
    await h.flow.load();
    expect(h.closed()).toBe(1);
    h.flow.tick();
    expect(viewModel(h.flow.state()).countdown).toBe("You can close this tab now.");

    const later = harness({ session: { status: "paid" }, closeDelay: 1 });
    await later.flow.load();
    expect(later.closed()).toBe(0);
    later.advance(1);
    later.flow.tick();
    expect(later.closed()).toBe(1);
  });

  it("shows an unknown link as not found", async () => {
    const h = harness();
    const flow = createFlow(
      {
        api: {
          session: async () => {
            throw new ApiError(404, "payment_page_not_found", "no");
          },
          authorize: async () => baseSession,
        },
        wallets: discoverWallets(new EventTarget()),
        sleep: async () => undefined,
        now: () => NOW,
        randomBytes: (n) => new Uint8Array(n),
        closeWindow: () => undefined,
        receiptPollMs: 1,
        closeDelay: null,
      },
      () => undefined,
    );
    await flow.load();
    expect(viewModel(flow.state()).title).toBe("Payment not found");
    expect(h.posted).toEqual([]);
  });
});

describe("server routes", () => {
  const TOKEN = "kPe1WlXWE5w54VCaKpdQrB2pgkr1rCsq";
  const app = () => {
    const hono = new Hono();
    registerPayPage(hono, { tokenExists: async (token) => token === TOKEN });
    return hono;
  };

  it("serves the page with a strict CSP and no inline script", async () => {
    const response = await app().request(`/pay/${TOKEN}`);
    expect(response.status).toBe(200);
    const csp = response.headers.get("content-security-policy") ?? "";
    expect(csp).toContain("script-src 'self'");
    expect(csp).not.toContain("unsafe-inline");
    expect(response.headers.get("cache-control")).toBe("no-store");
    expect(response.headers.get("referrer-policy")).toBe("no-referrer");
    const html = await response.text();
    expect(html).toContain(`data-token="${TOKEN}"`);
    expect(html).toMatch(/<script type="module" src="\.\.\/assets\/pay\.js\?v=[\w-]+"><\/script>/);
    expect(html).not.toMatch(/<script>|<style|style="|https?:\/\//);
  });

  it("answers an unknown or malformed token with a readable 404 page", async () => {
    for (const token of ["x".repeat(32), "short"]) {
      const response = await app().request(`/pay/${token}`);
      expect(response.status).toBe(404);
      expect(await response.text()).toContain("Payment not found");
    }
  });

  it("bundles the client with the QR library, and the stylesheet with the shared card", async () => {
    const hono = app();
    const html = await (await hono.request(`/pay/${TOKEN}`)).text();
    const version = /pay\.js\?v=([\w-]+)/.exec(html)?.[1];
    const script = await hono.request(`/assets/pay.js?v=${version}`);
    expect(script.headers.get("cache-control")).toBe("public, max-age=31536000, immutable");
    const body = await script.text();
    expect(body).toContain("eth_signTypedData_v4");
    expect(body).toContain("image/svg+xml");
    expect(body).not.toMatch(/^import |\bimport\(|from"\.\/|require\(/m);
    const css = await (await hono.request("/assets/pay.css")).text();
    expect(css).toContain(".card");
    expect(css).toContain(".deposit");
  });

  it("rate-limits pay links per token like authorization links", () => {
    expect(tokenOfPath(`/pay/${TOKEN}/authorizations`)).toEqual({ page: "pay", token: TOKEN });
    expect(tokenOfPath(`/pay/${TOKEN}`)).toEqual({ page: "pay", token: TOKEN });
    expect(tokenOfPath("/assets/pay.js")).toBeUndefined();
  });
});
