/**
 * The authorization page without a browser: its pure parts (close option, wording, state machine),
 * the flow against a fake wallet and service, and the server routes (HTML, CSP, 404, bundled assets).
 * The real browser and chain run in test/e2e/authorization-page.test.ts.
 */
import { Hono } from "hono";
import { describe, expect, it } from "vitest";
import { ApiError } from "../../service/http/authorization-page/client/api.ts";
import {
  createFlow,
  UNCONFIRMED_POLLS_BEFORE_FAILURE,
} from "../../service/http/authorization-page/client/flow.ts";
import {
  approvalText,
  capText,
  durationText,
  holdText,
} from "../../service/http/authorization-page/client/format.ts";
import type { Session, TermsResponse } from "../../service/http/authorization-page/client/types.ts";
import { viewModel } from "../../service/http/authorization-page/client/view-model.ts";
import { registerAuthorizationPage } from "../../service/http/authorization-page/routes.ts";
import { closeDelayFromQuery } from "../../service/http/hosted-page/client/close-option.ts";
import type { Eip1193Provider } from "../../service/http/hosted-page/client/wallet.ts";
import { discoverWallets } from "../../service/http/hosted-page/client/wallets.ts";

const CUSTOMER = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8";
const OTHER = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC";

const baseSession: Session = {
  object: "authorization_session",
  mandate: "mdt_1",
  livemode: false,
  status: "pending",
  needs_signature: true,
  merchant: { name: "Acme" },
  chain: {
    id: 31337,
    name: "Local chain (anvil)",
    rpc_url: "http://127.0.0.1:8545",
    native_currency: { name: "Ether", symbol: "ETH", decimals: 18 },
  },
  token: { symbol: "USDC", address: "0x5FbDB2315678afecb367f032d93F642f64180aa3", decimals: 6, permit: true },
  cap_decimal: "25",
  cap_change: null,
  period: "month",
  approval_periods: 12,
  approval_decimal: "300",
  hold_seconds: 3600,
  customer_address: null,
  pending_transaction: null,
};

const termsResponse: TermsResponse = {
  terms: {
    domain: { name: "MandateEscrow" },
    types: { Terms: [] },
    primaryType: "Terms",
    message: { mandateId: "0x01", cap: "25000000" },
  },
  permit: { domain: { name: "USDC" }, types: { Permit: [] }, primaryType: "Permit", message: { value: "1" } },
  approve: null,
};

describe("close option", () => {
  it.each([
    ["", null],
    ["?close=0", null],
    ["?close=true", null],
    ["?close=1", 5],
    ["?close=1&delay=0", 0],
    ["?close=1&delay=1", 1],
    ["?close=1&delay=60", 60],
    ["?close=1&delay=61", 5],
    ["?close=1&delay=-1", 5],
    ["?close=1&delay=2.5", 5],
    ["?close=1&delay=", 5],
    ["?close=1&delay=abc", 5],
    ["?close=1&delay=1e1", 5],
    ["?close=1&delay=007", 5],
  ])("%s → %s", (search, expected) => {
    expect(closeDelayFromQuery(search)).toBe(expected);
  });
});

describe("wording", () => {
  it("says the amounts in plain words", () => {
    expect(capText(baseSession)).toBe("up to 25 USDC per month");
    expect(approvalText(baseSession)).toBe(
      "300 USDC in total over 12 months, then you'll be asked to sign again",
    );
    expect(approvalText({ ...baseSession, approval_periods: 1, approval_decimal: "25" })).toBe(
      "25 USDC in total over 1 month, then you'll be asked to sign again",
    );
    expect(holdText(baseSession)).toBe("Each payment is held in escrow for 1 hour before Acme receives it.");
    expect(holdText({ ...baseSession, hold_seconds: 0 })).toBeNull();
  });
  it.each([
    [1, "1 second"],
    [90, "90 seconds"],
    [120, "2 minutes"],
    [3600, "1 hour"],
    [5400, "90 minutes"],
    [604800, "7 days"],
  ])("duration %d s → %s", (seconds, text) => {
    expect(durationText(seconds)).toBe(text);
  });
});

interface FakeOptions {
  readonly session?: Partial<Session>;
  readonly chainId?: number;
  readonly account?: string;
  readonly knownChains?: number[];
  readonly rejectSignatures?: number;
  readonly rejectAddChain?: boolean;
  readonly terms?: TermsResponse;
  readonly termsErrors?: ApiError[];
  readonly submitErrors?: ApiError[];
  /** Sessions the service reports after the submission, in turn (the last repeats). */
  readonly afterSubmit?: Partial<Session>[];
  readonly provider?: boolean;
  readonly closeDelay?: number | null;
  readonly sessionError?: ApiError;
  /** The session once a submission was refused (e.g. signed meanwhile in another tab). */
  readonly afterRefusal?: Partial<Session>;
}

const harness = (options: FakeOptions = {}) => {
  const calls: Array<{ method: string; params?: readonly unknown[] }> = [];
  const submitted: unknown[] = [];
  let session: Session = { ...baseSession, ...options.session };
  let chainId = options.chainId ?? 31337;
  let account = options.account ?? CUSTOMER;
  const known = new Set(options.knownChains ?? [31337, 1]);
  let rejections = options.rejectSignatures ?? 0;
  const termsErrors = [...(options.termsErrors ?? [])];
  const submitErrors = [...(options.submitErrors ?? [])];
  const after = [...(options.afterSubmit ?? [{ status: "active", needs_signature: false }])];
  let closed = 0;
  let clock = 0;
  let reads = 0;
  let receiptPolls = 0;

  const fail = (code: number, message: string) => Object.assign(new Error(message), { code });
  const provider: Eip1193Provider = {
    request: async ({ method, params }) => {
      calls.push({ method, ...(params ? { params } : {}) });
      switch (method) {
        case "eth_requestAccounts":
        case "eth_accounts":
          return [account];
        case "eth_chainId":
          return `0x${chainId.toString(16)}`;
        case "wallet_switchEthereumChain": {
          const target = Number((params?.[0] as { chainId?: string } | undefined)?.chainId);
          if (!known.has(target)) throw fail(4902, "Unrecognized chain ID");
          chainId = target;
          return null;
        }
        case "wallet_addEthereumChain": {
          if (options.rejectAddChain) throw fail(4001, "User rejected the request.");
          const target = Number((params?.[0] as { chainId?: string } | undefined)?.chainId);
          known.add(target);
          chainId = target;
          return null;
        }
        case "eth_signTypedData_v4":
          if (rejections > 0) {
            rejections -= 1;
            throw fail(4001, "User rejected the request.");
          }
          return `0x${"ab".repeat(65)}`;
        case "eth_sendTransaction":
          return `0x${"cd".repeat(32)}`;
        case "eth_getTransactionReceipt":
          receiptPolls += 1;
          return receiptPolls < 3 ? null : { status: "0x1" };
        default:
          throw fail(4200, `unsupported ${method}`);
      }
    },
  };

  const states: string[] = [];
  const flow = createFlow(
    {
      api: {
        session: async () => {
          if (options.sessionError) throw options.sessionError;
          reads += 1;
          if (session.pending_transaction !== null && reads > 1) {
            const next = after.length > 1 ? after.shift() : after[0];
            session = { ...session, pending_transaction: null, ...next };
          }
          return session;
        },
        terms: async (address) => {
          const error = termsErrors.shift();
          if (error) throw error;
          expect(address).toBe(account);
          return options.terms ?? termsResponse;
        },
        submit: async (request) => {
          submitted.push(request);
          const error = submitErrors.shift();
          if (error) {
            session = { ...session, ...options.afterRefusal };
            throw error;
          }
          session = { ...session, customer_address: request.customer_address, pending_transaction: "0xfeed" };
          return session;
        },
      },
      // `window.ethereum` only, as most tests need: the wallet choice has its own tests (hosted-page.test.ts).
      wallets: discoverWallets(
        Object.assign(new EventTarget(), options.provider === false ? {} : { ethereum: provider }),
      ),
      sleep: () => new Promise((resolve) => setImmediate(resolve)),
      now: () => clock,
      closeWindow: () => {
        closed += 1;
      },
      pollIntervalMs: 500,
      closeDelay: options.closeDelay ?? null,
    },
    (state) => {
      const model = viewModel(state);
      if (states.at(-1) !== model.stage) states.push(model.stage);
    },
  );
  return {
    flow,
    calls,
    submitted,
    states,
    methods: () => calls.map((call) => call.method),
    view: () => viewModel(flow.state()),
    closed: () => closed,
    advance: (seconds: number) => {
      clock += seconds;
    },
    setAccount: (next: string) => {
      account = next;
    },
  };
};

describe("authorization flow", () => {
  it("connects, signs terms then permit, submits the message as received and waits for the chain", async () => {
    const h = harness();
    await h.flow.load();
    expect(h.view().stage).toBe("connect");
    expect(h.view().action).toEqual({ kind: "connect", label: "Connect wallet" });
    await h.flow.connect();
    expect(h.view().stage).toBe("authorize");
    await h.flow.authorize();
    expect(h.view().stage).toBe("done");
    expect(h.view().title).toBe("You're all set");
    expect(h.methods().filter((m) => m === "eth_signTypedData_v4")).toHaveLength(2);
    const signs = h.calls.filter((c) => c.method === "eth_signTypedData_v4");
    expect(signs[0]?.params).toEqual([CUSTOMER, JSON.stringify(termsResponse.terms)]);
    expect(signs[1]?.params).toEqual([CUSTOMER, JSON.stringify(termsResponse.permit)]);
    expect(h.submitted).toEqual([
      {
        customer_address: CUSTOMER,
        terms: termsResponse.terms.message,
        signature: `0x${"ab".repeat(65)}`,
        permit_signature: `0x${"ab".repeat(65)}`,
      },
    ]);
    expect(h.view().steps.every((step) => step.status === "done")).toBe(true);
    expect(h.states).toEqual(["connect", "busy", "authorize", "busy", "done"]);
  });

  it("asks to sign a raise of the cap on an active mandate, saying the limit now and the new one", async () => {
    const h = harness({
      session: {
        status: "active",
        customer_address: CUSTOMER,
        cap_decimal: "40",
        approval_decimal: "480",
        cap_change: { from_decimal: "25", to_decimal: "40" },
      },
      afterSubmit: [{ status: "active", needs_signature: false, cap_change: null }],
    });
    await h.flow.load();
    expect(h.view().stage).toBe("connect");
    expect(h.view().title).toBe("Raise your limit for Acme");
    expect(h.view().lead).toBe(
      "Acme asks to raise your limit from 25 to 40 USDC per month. Until you sign, it can collect at most 25 USDC per month.",
    );
    expect(h.view().summary.slice(0, 2)).toEqual([
      { label: "New limit", value: "Up to 40 USDC per month" },
      { label: "Current limit", value: "25 USDC per month" },
    ]);
    await h.flow.connect();
    await h.flow.authorize();
    expect(h.view().stage).toBe("done");
    expect(h.submitted).toHaveLength(1);
  });

  it("shows a declined signature and succeeds on retry", async () => {
    const h = harness({ rejectSignatures: 1 });
    await h.flow.load();
    await h.flow.connect();
    await h.flow.authorize();
    const view = h.view();
    expect(view.error?.title).toBe("Signature declined");
    expect(view.focus).toBe("error");
    expect(view.action).toEqual({ kind: "retry", label: "Try again" });
    expect(view.steps.find((s) => s.id === "sign_terms")?.status).toBe("failed");
    await h.flow.retry();
    expect(h.view().stage).toBe("done");
  });

  it("names the account to switch to when another one is connected", async () => {
    const h = harness({
      session: { status: "requires_authorization", customer_address: CUSTOMER },
      account: OTHER,
    });
    await h.flow.load();
    expect(h.view().title).toBe("Renew your payments to Acme");
    await h.flow.connect();
    expect(h.view().error).toEqual({
      kind: "wrong_account",
      title: "Wrong account",
      message: `This authorization belongs to the account ${CUSTOMER}, not to ${OTHER}. Switch your wallet to that account, then try again.`,
      retry: "connect",
    });
    expect(h.view().summary.slice(-2)).toEqual([
      { label: "Your wallet", value: "0x7099…79C8" },
      { label: "Connected", value: "0x3C44…93BC (another account)" },
    ]);
    h.setAccount(CUSTOMER);
    await h.flow.retry();
    expect(h.view().stage).toBe("authorize");
  });

  it("switches the chain, adding it when the wallet lacks it", async () => {
    const h = harness({ chainId: 1, knownChains: [1] });
    await h.flow.load();
    await h.flow.connect();
    expect(h.view().stage).toBe("authorize");
    const add = h.calls.find((c) => c.method === "wallet_addEthereumChain");
    expect(add?.params).toEqual([
      {
        chainId: "0x7a69",
        chainName: "Local chain (anvil)",
        rpcUrls: ["http://127.0.0.1:8545"],
        nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
      },
    ]);
  });

  it("asks to add the chain by hand when there is no RPC URL or the wallet refuses to add it", async () => {
    const noRpc = harness({
      chainId: 1,
      knownChains: [1],
      session: { chain: { ...baseSession.chain, rpc_url: null } },
    });
    await noRpc.flow.load();
    await noRpc.flow.connect();
    expect(noRpc.view().error?.title).toBe("Add Local chain (anvil) to your wallet");
    expect(noRpc.view().error?.message).toBe(
      "Your wallet doesn't know Local chain (anvil) (chain ID 31337). Add this network to your wallet, then try again.",
    );
    expect(noRpc.methods()).not.toContain("wallet_addEthereumChain");

    const refused = harness({ chainId: 1, knownChains: [1], rejectAddChain: true });
    await refused.flow.load();
    await refused.flow.connect();
    expect(refused.view().error?.message).toContain(
      "adding it was declined. Add this network to your wallet",
    );
  });

  it("says when there is no wallet", async () => {
    const h = harness({ provider: false });
    await h.flow.load();
    expect(h.view().error?.title).toBe("No wallet found");
    expect(h.view().summary.find((row) => row.label === "Amount")?.value).toBe("Up to 25 USDC per month");
  });

  it("sends the approval transaction when the token has no permit", async () => {
    const approve = { to: "0x5FbDB2315678afecb367f032d93F642f64180aa3", data: "0x095ea7b3" } as const;
    const h = harness({
      session: { token: { ...baseSession.token, permit: false } },
      terms: { ...termsResponse, permit: null, approve },
    });
    await h.flow.load();
    expect(h.view().steps.find((s) => s.id === "allowance")?.label).toBe("Approve USDC");
    // Said before the customer acts: one approval transaction, its gas paid by them, and why.
    expect(h.view().gas).toEqual({
      title: "This token needs one approval transaction",
      message:
        "USDC doesn't support gasless approvals (EIP-2612 permits), so your wallet sends one approval transaction on Local chain (anvil) and pays its network fee (gas) in ETH. After that, every charge costs you no gas: the payment service sends each one and pays its fees.",
    });
    expect(h.view().stage).toBe("connect");
    await h.flow.connect();
    await h.flow.authorize();
    expect(h.view().stage).toBe("done");
    expect(h.calls.find((c) => c.method === "eth_sendTransaction")?.params).toEqual([
      { from: CUSTOMER, to: approve.to, data: approve.data },
    ]);
    expect(h.methods().filter((m) => m === "eth_getTransactionReceipt")).toHaveLength(3);
    expect(h.submitted).toMatchObject([{ permit_signature: null }]);
  });

  it("skips the allowance when neither permit nor approval is needed", async () => {
    const h = harness({ terms: { ...termsResponse, permit: null } });
    await h.flow.load();
    expect(h.view().gas).toBeNull(); // a token with permit: nothing to pay
    await h.flow.connect();
    await h.flow.authorize();
    expect(h.view().steps.find((s) => s.id === "allowance")?.status).toBe("skipped");
    expect(h.methods().filter((m) => m === "eth_signTypedData_v4")).toHaveLength(1);

    // A token without permit whose allowance is already enough: the notice goes once the terms say so.
    const allowed = harness({
      session: { token: { ...baseSession.token, permit: false } },
      terms: { ...termsResponse, permit: null },
      submitErrors: [new ApiError(400, "terms_expired", "The terms expired.")],
    });
    await allowed.flow.load();
    expect(allowed.view().gas).not.toBeNull();
    await allowed.flow.connect();
    await allowed.flow.authorize();
    expect(allowed.view().error?.title).toBe("Signature expired");
    expect(allowed.view().gas).toBeNull();
    expect(allowed.methods()).not.toContain("eth_sendTransaction");
  });

  it("shows the service's errors and recovers from expired terms", async () => {
    const h = harness({
      submitErrors: [new ApiError(400, "terms_expired", "The terms expired.")],
    });
    await h.flow.load();
    await h.flow.connect();
    await h.flow.authorize();
    expect(h.view().error?.title).toBe("Signature expired");
    await h.flow.retry();
    expect(h.view().stage).toBe("done");

    const refused = harness({
      submitErrors: [new ApiError(400, "authorization_failed", "The escrow refused: nonce used.")],
    });
    await refused.flow.load();
    await refused.flow.connect();
    await refused.flow.authorize();
    expect(refused.view().error).toMatchObject({
      title: "Authorization refused",
      message: "The escrow refused: nonce used.",
    });
  });

  it("shows the done state when the terms were signed meanwhile", async () => {
    const h = harness({
      submitErrors: [new ApiError(400, "terms_changed", "These terms were already signed. Reload the page.")],
      afterRefusal: { status: "active", needs_signature: false, customer_address: CUSTOMER },
    });
    await h.flow.load();
    await h.flow.connect();
    await h.flow.authorize();
    expect(h.view().stage).toBe("done");

    const changed = harness({
      submitErrors: [new ApiError(400, "terms_changed", "These are not the mandate's terms.")],
    });
    await changed.flow.load();
    await changed.flow.connect();
    await changed.flow.authorize();
    expect(changed.view().error?.title).toBe("The terms changed");
  });

  it("gives up waiting when the submitted authorization is lost", async () => {
    const h = harness({ afterSubmit: [{ needs_signature: true, pending_transaction: null }] });
    await h.flow.load();
    await h.flow.connect();
    await h.flow.authorize();
    expect(h.view().error?.title).toBe("Authorization not confirmed");
    expect(UNCONFIRMED_POLLS_BEFORE_FAILURE).toBeGreaterThan(1);
  });

  it("opens in the done, waiting, revoked or not-found state as the session says", async () => {
    const done = harness({
      session: { status: "active", needs_signature: false, customer_address: CUSTOMER },
    });
    await done.flow.load();
    expect(done.view().stage).toBe("done");
    expect(done.calls).toEqual([]);

    const revoked = harness({ session: { status: "revoked", needs_signature: false } });
    await revoked.flow.load();
    expect(revoked.view()).toMatchObject({ stage: "revoked", title: "Authorization revoked", action: null });

    const waiting = harness({ session: { pending_transaction: "0xfeed", customer_address: CUSTOMER } });
    await waiting.flow.load();
    expect(waiting.states).toEqual(["busy", "done"]);

    const missing = harness({
      sessionError: new ApiError(404, "authorization_not_found", "No such authorization."),
    });
    await missing.flow.load();
    expect(missing.view()).toMatchObject({ stage: "not_found", title: "Authorization not found" });
  });

  it("closes the tab after the countdown, unless kept open", async () => {
    const h = harness({ closeDelay: 2, session: { status: "active", needs_signature: false } });
    const seen: Array<string | null> = [];
    await h.flow.load();
    // The page's clock ticks several times a second; the countdown moves a second per second.
    for (let i = 0; i < 12 && h.closed() === 0; i += 1) {
      seen.push(h.view().countdown);
      h.advance(0.25);
      h.flow.tick();
    }
    expect(h.closed()).toBe(1);
    expect(seen.filter((text) => text === "This tab will close in 2 seconds.")).toHaveLength(4);
    expect(seen.filter((text) => text === "This tab will close in 1 second.")).toHaveLength(4);
    h.flow.tick(); // still here a tick later: the browser refused
    expect(h.view().countdown).toBe("You can close this tab now.");

    const kept = harness({ closeDelay: 5, session: { status: "active", needs_signature: false } });
    await kept.flow.load();
    expect(kept.view().action).toEqual({ kind: "keep_open", label: "Keep this tab open" });
    kept.advance(1);
    kept.flow.tick();
    expect(kept.view().countdown).toBe("This tab will close in 4 seconds.");
    kept.flow.keepOpen();
    for (let i = 0; i < 6; i += 1) {
      kept.advance(1);
      kept.flow.tick();
    }
    expect(kept.closed()).toBe(0);
    expect(kept.view().countdown).toBeNull();
  });
});

describe("authorization page routes", () => {
  const TOKEN = "tok_0123456789abcdefghij";
  const app = () => {
    const hono = new Hono();
    registerAuthorizationPage(hono, { tokenExists: async (token) => token === TOKEN });
    return hono;
  };

  it("serves the page with a strict CSP and no inline script", async () => {
    const response = await app().request(`/authorize/${TOKEN}`);
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toBe("text/html; charset=utf-8");
    const csp = response.headers.get("content-security-policy") ?? "";
    expect(csp).toContain("default-src 'self'");
    expect(csp).toContain("script-src 'self'");
    expect(csp).not.toContain("unsafe-inline");
    expect(response.headers.get("cache-control")).toBe("no-store");
    expect(response.headers.get("referrer-policy")).toBe("no-referrer");
    const html = await response.text();
    expect(html).toContain(`data-token="${TOKEN}"`);
    expect(html).toMatch(/<script type="module" src="\.\.\/assets\/authorize\.js\?v=[\w-]+"><\/script>/);
    expect(html).not.toMatch(/<script>|<style|style="|https?:\/\//);
  });

  it("answers an unknown or malformed token with a readable 404 page", async () => {
    for (const token of ["tok_unknownunknownunknown", "short", "bad token with spaces and more chars"]) {
      const response = await app().request(`/authorize/${encodeURIComponent(token)}`);
      expect(response.status).toBe(404);
      expect(response.headers.get("content-type")).toBe("text/html; charset=utf-8");
      const html = await response.text();
      expect(html).toContain("Authorization not found");
      expect(html).not.toContain("<script");
    }
  });

  it("serves the bundled script and stylesheet, cacheable by version", async () => {
    const hono = app();
    const html = await (await hono.request(`/authorize/${TOKEN}`)).text();
    const version = /authorize\.js\?v=([\w-]+)/.exec(html)?.[1];
    const script = await hono.request(`/assets/authorize.js?v=${version}`);
    expect(script.status).toBe(200);
    expect(script.headers.get("content-type")).toBe("text/javascript; charset=utf-8");
    expect(script.headers.get("cache-control")).toBe("public, max-age=31536000, immutable");
    const body = await script.text();
    expect(body).toContain("eth_signTypedData_v4");
    expect(body).not.toMatch(/^import |\bimport\(|from"\.\//m);
    const bare = await hono.request("/assets/authorize.js");
    expect(bare.headers.get("cache-control")).toBe("no-cache");
    const etag = bare.headers.get("etag") ?? "";
    expect((await hono.request("/assets/authorize.js", { headers: { "if-none-match": etag } })).status).toBe(
      304,
    );
    const css = await hono.request("/assets/authorize.css");
    expect(css.headers.get("content-type")).toBe("text/css; charset=utf-8");
    expect(await css.text()).toContain(".card");
  });
});
