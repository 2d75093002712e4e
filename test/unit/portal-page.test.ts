/**
 * The portal page's client without a browser: what it shows for a portal (wording, the sign link, the
 * holds), the cancel's confirmation and outcome through a fake API, a link that expired meanwhile, and
 * the gasless revocation with a fake wallet: the server's typed data signed by the mandate's own
 * account, submitted with its deadline, and confirmed once the portal no longer lists the mandate.
 * The real browser runs in test/e2e/portal.test.ts.
 */
import { describe, expect, it } from "vitest";
import { ApiError } from "../../service/http/hosted-page/client/http.ts";
import type { Eip1193Provider } from "../../service/http/hosted-page/client/wallet.ts";
import { discoverWallets } from "../../service/http/hosted-page/client/wallets.ts";
import type { Api } from "../../service/http/portal-page/client/api.ts";
import { createFlow } from "../../service/http/portal-page/client/flow.ts";
import type { Session } from "../../service/http/portal-page/client/types.ts";
import { viewModel } from "../../service/http/portal-page/client/view-model.ts";

const DEC_1 = Date.UTC(2031, 11, 1) / 1000;
const JAN_1 = Date.UTC(2032, 0, 1) / 1000;

const chain = {
  id: 31337,
  name: "Local test chain",
  rpc_url: null,
  native_currency: { name: "Ether", symbol: "ETH", decimals: 18 },
};

const portal: Session = {
  object: "portal",
  livemode: false,
  customer: "cus_a",
  merchant: { name: "Shop" },
  return_url: "https://shop.example/account",
  expires_at: DEC_1 + 3600,
  features: { subscription_cancel: { enabled: true }, mandate_revoke: { enabled: true } },
  mandates: [
    {
      id: "mdt_1",
      status: "active",
      chain,
      token: { symbol: "USDC", decimals: 6 },
      cap_decimal: "10",
      period: "month",
      approval_left_decimal: "110",
      hold_seconds: 3600,
      customer_address: "0x2546BcD3c84621e976D8185a91A922aE77ECEc30",
      signature_wanted: false,
      authorization_url: "http://127.0.0.1:4242/authorize/t1",
      revocable: false,
      subscription: "sub_1",
      holds: [{ charge: "ch_1", amount_decimal: "10", release_at: DEC_1 + 3600 }],
      recent_charges: [
        {
          id: "ch_1",
          status: "succeeded",
          amount_decimal: "10",
          period: 0,
          failure_code: null,
          charged_at: DEC_1,
          created: DEC_1,
        },
      ],
    },
    {
      id: "mdt_2",
      status: "requires_authorization",
      chain,
      token: { symbol: "USDC", decimals: 6 },
      cap_decimal: "25",
      period: "month",
      approval_left_decimal: "0",
      hold_seconds: 0,
      customer_address: null,
      signature_wanted: true,
      authorization_url: "http://127.0.0.1:4242/authorize/t2",
      revocable: false,
      subscription: null,
      holds: [],
      recent_charges: [],
    },
  ],
  subscriptions: [
    {
      id: "sub_1",
      status: "active",
      mandate: "mdt_1",
      product_name: "Team",
      amount_decimal: "10",
      token: "USDC",
      cap_decimal: "10",
      current_period: { start: DEC_1, end: JAN_1 },
      next_charge: { at: JAN_1, amount_decimal: "10" },
      cancel_at_period_end: false,
      ends_at: null,
      cancelable: true,
    },
  ],
};

const canceled: Session = {
  ...portal,
  subscriptions: portal.subscriptions.map((s) => ({
    ...s,
    cancel_at_period_end: true,
    next_charge: null,
    ends_at: JAN_1,
    cancelable: false,
  })),
};

const CUSTOMER = "0x2546BcD3c84621e976D8185a91A922aE77ECEc30";
const STRANGER = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8";
const SIGNATURE = `0x${"12".repeat(65)}`;

/** A wallet on chain 31337 with `account`, logging what it was asked; declines signing when told. */
const fakeWallet = (account: string, decline = false) => {
  const calls: { method: string; params?: readonly unknown[] }[] = [];
  const provider: Eip1193Provider = {
    request: async ({ method, params }) => {
      calls.push({ method, ...(params ? { params } : {}) });
      switch (method) {
        case "eth_requestAccounts":
          return [account];
        case "eth_chainId":
          return "0x7a69";
        case "eth_signTypedData_v4":
          if (decline) throw Object.assign(new Error("User rejected"), { code: 4001 });
          return SIGNATURE;
        default:
          throw new Error(`unexpected ${method}`);
      }
    },
  };
  return { provider, calls };
};

const flowWith = (api: Partial<Api>, ethereum?: Eip1193Provider) => {
  const target: EventTarget & { ethereum?: unknown } = new EventTarget();
  if (ethereum) target.ethereum = ethereum;
  return createFlow(
    {
      api: {
        session: async () => portal,
        cancel: async () => canceled,
        revocation: async () => {
          throw new Error("not asked in this test");
        },
        revoke: async () => {
          throw new Error("not asked in this test");
        },
        ...api,
      },
      wallets: discoverWallets(target),
      sleep: async () => undefined,
      now: () => DEC_1,
      closeWindow: () => undefined,
      closeDelay: null,
      pollIntervalMs: 1,
      confirmPolls: 3,
    },
    () => undefined,
  );
};

const revocable: Session = {
  ...portal,
  mandates: portal.mandates.map((m) => (m.id === "mdt_1" ? { ...m, revocable: true } : m)),
};
const revoked: Session = {
  ...revocable,
  mandates: revocable.mandates.filter((m) => m.id !== "mdt_1"),
  subscriptions: [],
};
const TYPED_DATA = {
  domain: { name: "MandateEscrow", version: "1", chainId: 31337, verifyingContract: "0xe7f1" },
  types: {
    Revoke: [
      { name: "mandateId", type: "bytes32" },
      { name: "deadline", type: "uint64" },
    ],
  },
  primaryType: "Revoke",
  message: { mandateId: "0xabc", deadline: "1954119600" },
};

describe("the portal page's view", () => {
  it("shows each payment with its price, next charge, hold and latest charges, and the sign link", async () => {
    const flow = flowWith({});
    await flow.load();
    const view = viewModel(flow.state());
    expect(view.title).toBe("Your payments to Shop");
    expect(view.badge).toBe("Test mode");
    expect(view.returnLink).toEqual({ href: "https://shop.example/account", label: "Return to Shop" });
    const [team, renewal] = view.items;
    expect(team?.title).toBe("Team");
    expect(team?.rows).toEqual(
      expect.arrayContaining([
        { label: "Price", value: "10 USDC per month" },
        { label: "Next charge", value: "10 USDC on 1 Jan 2032" },
        { label: "Authorized", value: "Up to 10 USDC per month" },
        { label: "Held in escrow", value: "10 USDC" },
      ]),
    );
    expect(team?.charges).toEqual([
      { label: "1 Dec 2031", value: "10 USDC · paid, held in escrow until 1 Dec 2031, 01:00 UTC" },
    ]);
    expect(team?.signLink).toBeNull();
    expect(team?.buttons.map((b) => b.label)).toEqual(["Cancel subscription"]);
    expect(renewal).toMatchObject({
      title: "Payments to Shop",
      status: "Needs your signature",
      signLink: { href: "http://127.0.0.1:4242/authorize/t2", label: "Review and sign" },
      buttons: [],
    });
  });

  it("asks before canceling, cancels on confirmation, and says when it ends", async () => {
    const asked: string[] = [];
    const flow = flowWith({
      cancel: async (id) => {
        asked.push(id);
        return canceled;
      },
    });
    await flow.load();
    await flow.act("cancel:sub_1");
    const question = viewModel(flow.state()).items[0];
    expect(question?.question).toBe(
      "Cancel Team? It stays active until 1 Jan 2032 and is not charged again.",
    );
    expect(question?.buttons.map((b) => b.action)).toEqual(["confirm_cancel:sub_1", "dismiss"]);
    await flow.act("dismiss");
    expect(viewModel(flow.state()).items[0]?.question).toBeNull();
    expect(asked).toEqual([]);

    await flow.act("cancel:sub_1");
    await flow.act("confirm_cancel:sub_1");
    expect(asked).toEqual(["sub_1"]);
    const after = viewModel(flow.state());
    expect(after.status).toBe(
      "Your Team subscription ends on 1 Jan 2032. Nothing more will be charged for it.",
    );
    expect(after.items[0]?.buttons).toEqual([]);
    expect(after.items[0]?.rows).toContainEqual({ label: "Ends", value: "1 Jan 2032" });
  });

  it("offers no cancel where the session does not allow it", async () => {
    const flow = flowWith({
      session: async () => ({
        ...portal,
        subscriptions: portal.subscriptions.map((s) => ({ ...s, cancelable: false })),
      }),
    });
    await flow.load();
    expect(viewModel(flow.state()).items[0]?.buttons).toEqual([]);
  });

  it("says the link is gone when it expired meanwhile, and shows other refusals with a retry", async () => {
    const expired = flowWith({
      cancel: async () => {
        throw new ApiError(404, "portal_session_expired", "This portal link has expired.");
      },
    });
    await expired.load();
    await expired.act("confirm_cancel:sub_1");
    expect(viewModel(expired.state())).toMatchObject({ stage: "not_found", title: "Link not valid" });

    const refused = flowWith({
      cancel: async () => {
        throw new ApiError(400, "portal_feature_disabled", "This portal link does not allow canceling.");
      },
    });
    await refused.load();
    await refused.act("confirm_cancel:sub_1");
    expect(viewModel(refused.state())).toMatchObject({
      error: { title: "Subscription not canceled", message: "This portal link does not allow canceling." },
      action: { kind: "retry", label: "Try again" },
    });
  });

  it("revokes without gas: the mandate's wallet signs the server's Revoke, the service relays it", async () => {
    const wallet = fakeWallet(CUSTOMER);
    const submitted: unknown[] = [];
    let reads = 0;
    const flow = flowWith(
      {
        // Listed until the third read after the submission: the chain confirms it meanwhile.
        session: async () => (submitted.length > 0 && ++reads >= 2 ? revoked : revocable),
        revocation: async (id) => ({
          object: "revocation_request",
          mandate: id,
          customer_address: CUSTOMER,
          typed_data: TYPED_DATA,
        }),
        revoke: async (id, signed) => {
          submitted.push({ id, ...signed });
          return { object: "revocation", mandate: id, status: "pending", transaction: "0xfeed" };
        },
      },
      wallet.provider,
    );
    await flow.load();
    const before = viewModel(flow.state()).items[0];
    expect(before?.buttons.map((b) => b.label)).toEqual(["Cancel subscription", "Revoke"]);
    await flow.act("revoke:mdt_1");
    const asked = viewModel(flow.state()).items[0];
    expect(asked?.question).toBe(
      "Revoke this authorization? Shop can then no longer collect from your wallet with it, and your Team subscription ends. Your wallet signs a message: no transaction, no gas.",
    );
    expect(asked?.buttons.map((b) => b.action)).toEqual(["confirm_revoke:mdt_1", "dismiss"]);
    expect(wallet.calls).toEqual([]);

    await flow.act("confirm_revoke:mdt_1");
    expect(wallet.calls.map((c) => c.method)).toEqual([
      "eth_requestAccounts",
      "eth_chainId",
      "eth_signTypedData_v4",
    ]);
    expect(wallet.calls[2]?.params).toEqual([CUSTOMER, JSON.stringify(TYPED_DATA)]);
    expect(submitted).toEqual([{ id: "mdt_1", deadline: "1954119600", signature: SIGNATURE }]);
    const after = viewModel(flow.state());
    expect(after.status).toBe(
      "Revoked: Shop can no longer collect payments from your wallet with this authorization.",
    );
    expect(after.items.map((i) => i.id)).toEqual(["mdt_2"]);
  });

  it("refuses another account before anything is signed, and a declined signature sends nothing", async () => {
    const stranger = fakeWallet(STRANGER);
    const submitted: unknown[] = [];
    const api: Partial<Api> = {
      session: async () => revocable,
      revocation: async (id) => ({
        object: "revocation_request",
        mandate: id,
        customer_address: CUSTOMER,
        typed_data: TYPED_DATA,
      }),
      revoke: async (id, signed) => {
        submitted.push(signed);
        return { object: "revocation", mandate: id, status: "pending", transaction: "0xfeed" };
      },
    };
    const wrong = flowWith(api, stranger.provider);
    await wrong.load();
    await wrong.act("confirm_revoke:mdt_1");
    expect(viewModel(wrong.state()).error).toMatchObject({
      title: "Wrong account",
      message: `This authorization belongs to the account ${CUSTOMER}, not to ${STRANGER}. Switch your wallet to that account, then try again.`,
    });
    expect(stranger.calls.map((c) => c.method)).toEqual(["eth_requestAccounts"]);

    const declining = fakeWallet(CUSTOMER, true);
    const declined = flowWith(api, declining.provider);
    await declined.load();
    await declined.act("confirm_revoke:mdt_1");
    expect(viewModel(declined.state()).error).toMatchObject({
      title: "Signature declined",
      message: "You declined to sign the revocation in your wallet. Nothing changed.",
    });
    expect(submitted).toEqual([]);
  });

  it("shows the service's refusal of a revocation (e.g. the chain not answering)", async () => {
    const flow = flowWith(
      {
        session: async () => revocable,
        revocation: async () => {
          throw new ApiError(503, "chain_unavailable", "The network is not answering. Try again shortly.");
        },
      },
      fakeWallet(CUSTOMER).provider,
    );
    await flow.load();
    await flow.act("confirm_revoke:mdt_1");
    expect(viewModel(flow.state()).error).toMatchObject({
      title: "Not revoked",
      message: "The network is not answering. Try again shortly.",
    });
  });
});
