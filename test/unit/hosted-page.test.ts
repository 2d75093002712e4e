/**
 * The hosted pages' shared client core without a browser: EIP-6963 discovery (what an announcement
 * must be, duplicates, the `window.ethereum` fallback, late wallets) and the wallet choice as a page's
 * flow makes it (ask when several, use the only one, remember the choice, cancel, wait for a late one).
 * The real browser runs in test/e2e/authorization-page.test.ts and pay-page.test.ts.
 */
import { describe, expect, it } from "vitest";
import type { WalletChoice } from "../../service/http/hosted-page/client/page-flow.ts";
import type { Eip1193Provider } from "../../service/http/hosted-page/client/wallet.ts";
import {
  ANNOUNCE_EVENT,
  announcedWallet,
  discoverWallets,
  INJECTED_WALLET,
  REQUEST_EVENT,
  safeIcon,
  safeName,
  type WalletMemory,
} from "../../service/http/hosted-page/client/wallets.ts";
import { createFlow } from "../../service/http/pay-page/client/flow.ts";
import { viewModel } from "../../service/http/pay-page/client/view-model.ts";
import { NOW, paySession } from "./pay-session.ts";

const ICON = "data:image/svg+xml,%3Csvg xmlns='http://www.w3.org/2000/svg'/%3E";
const PAYER_A = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8";
const PAYER_B = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC";

/** A provider that answers like a wallet on chain 31337 and logs what it was asked. */
const fakeProvider = (account: string) => {
  const calls: string[] = [];
  const provider: Eip1193Provider = {
    request: async ({ method }) => {
      calls.push(method);
      switch (method) {
        case "eth_requestAccounts":
          return [account];
        case "eth_chainId":
          return "0x7a69";
        case "eth_signTypedData_v4":
          return `0x${"12".repeat(65)}`;
        default:
          throw new Error(`unexpected ${method}`);
      }
    },
  };
  return { provider, calls };
};

const info = (uuid: string, name: string, rdns = `com.example.${uuid}`) => ({ uuid, name, icon: ICON, rdns });

const announce = (target: EventTarget, detail: unknown) =>
  target.dispatchEvent(new CustomEvent(ANNOUNCE_EVENT, { detail }));

describe("EIP-6963 announcements", () => {
  it.each([
    ["data:image/png;base64,iVBORw0KGgo=", true],
    [ICON, true],
    ["data:image/svg+xml;charset=utf-8,%3Csvg/%3E", true],
    ["data:image/webp;base64,UklGR", true],
    ["javascript:alert(1)", false],
    ["data:text/html,<script>alert(1)</script>", false],
    ["data:text/html;base64,PHNjcmlwdD4=", false],
    ["https://wallet.example/icon.png", false],
    [" data:image/png;base64,AAAA", false],
    ["data:image/png", false],
    [`data:image/png;base64,${"A".repeat(300_000)}`, false],
    [42, false],
    [null, false],
  ])("icon %s is shown: %s", (icon, shown) => {
    expect(safeIcon(icon)).toBe(shown ? icon : null);
  });

  it("takes a name as one line of text, cut to fit", () => {
    expect(safeName("  Rabby \n Wallet\u0000 ")).toBe("Rabby Wallet");
    expect(safeName("<img src=x onerror=alert(1)>")).toBe("<img src=x onerror=alert(1)>");
    expect(safeName("W".repeat(100))).toBe(`${"W".repeat(47)}…`);
    expect(safeName("   ")).toBeNull();
    expect(safeName(7)).toBeNull();
  });

  it("accepts a well-formed announcement only, dropping an icon that is not a data image", () => {
    const { provider } = fakeProvider(PAYER_A);
    expect(announcedWallet({ info: info("a", "Alpha"), provider })?.info).toEqual(info("a", "Alpha"));
    expect(
      announcedWallet({ info: { ...info("a", "Alpha"), icon: "javascript:alert(1)" }, provider })?.info.icon,
    ).toBeNull();
    for (const bad of [
      null,
      "wallet",
      { info: info("a", "Alpha") },
      { info: info("a", "Alpha"), provider: {} },
      { info: { ...info("a", "Alpha"), uuid: "" }, provider },
      { info: { ...info("a", "Alpha"), name: "" }, provider },
      { info: null, provider },
    ])
      expect(announcedWallet(bad)).toBeNull();
  });

  it("asks wallets to announce themselves, keeps them in order, and ignores repeats of a uuid", () => {
    const target = new EventTarget();
    let requested = 0;
    target.addEventListener(REQUEST_EVENT, () => {
      requested += 1;
    });
    const wallets = discoverWallets(target);
    expect(requested).toBe(1);
    let changes = 0;
    wallets.subscribe(() => {
      changes += 1;
    });
    const a = fakeProvider(PAYER_A);
    const b = fakeProvider(PAYER_B);
    announce(target, { info: info("a", "Alpha"), provider: a.provider });
    announce(target, { info: info("b", "Beta"), provider: b.provider });
    announce(target, { info: info("a", "Impostor"), provider: b.provider });
    announce(target, { info: info("c", "Broken") });
    expect(wallets.list().map((w) => w.info.name)).toEqual(["Alpha", "Beta"]);
    expect(wallets.list()[0]?.provider).toBe(a.provider);
    expect(changes).toBe(2);
  });

  it("falls back to window.ethereum only while no wallet announced itself, looking it up at each use", () => {
    const injected = fakeProvider(PAYER_A);
    const target: EventTarget & { ethereum?: unknown } = new EventTarget();
    const wallets = discoverWallets(target);
    expect(wallets.list()).toEqual([]);
    target.ethereum = injected.provider; // injected after the page's script ran
    expect(wallets.list()).toEqual([{ info: INJECTED_WALLET, provider: injected.provider }]);
    const announced = fakeProvider(PAYER_B);
    announce(target, { info: info("b", "Beta"), provider: announced.provider });
    expect(wallets.list().map((w) => w.info.name)).toEqual(["Beta"]);
  });
});

// ---------------------------------------------------------------------------------------------------
// The choice, as the pay page's flow makes it (the authorization page's is the same core)

const session = paySession;

const page = (
  options: {
    memory?: WalletMemory;
    ethereum?: Eip1193Provider;
    sleep?: (target: EventTarget) => Promise<void>;
  } = {},
) => {
  const target: EventTarget & { ethereum?: unknown } = new EventTarget();
  if (options.ethereum) target.ethereum = options.ethereum;
  const posted: string[] = [];
  const seen: WalletChoice[] = [];
  const flow = createFlow(
    {
      api: {
        session: async () => session,
        authorize: async (request) => {
          posted.push(request.from);
          return { ...session, gasless_transaction: { hash: "0xrelayed", status: "pending" } };
        },
      },
      wallets: discoverWallets(target),
      ...(options.memory ? { memory: options.memory } : {}),
      sleep: async () => options.sleep?.(target),
      now: () => NOW,
      randomBytes: (n) => new Uint8Array(n),
      closeWindow: () => undefined,
      receiptPollMs: 1,
      closeDelay: null,
    },
    (_state, wallets) => seen.push(wallets),
  );
  return { flow, target, posted, seen, view: () => viewModel(flow.state()) };
};

const memory = (initial: string | null = null) => {
  let value = initial;
  return {
    get: () => value,
    set: (rdns: string) => {
      value = rdns;
    },
    value: () => value,
  };
};

describe("choosing the wallet", () => {
  it("asks which wallet when several announce themselves, asks nothing of any before, and pays with the one picked", async () => {
    const first = fakeProvider(PAYER_A);
    const second = fakeProvider(PAYER_B);
    const remembered = memory();
    const p = page({ memory: remembered });
    announce(p.target, { info: info("a", "Alpha"), provider: first.provider });
    announce(p.target, { info: info("b", "Beta"), provider: second.provider });
    await p.flow.load();
    await p.flow.payGasless();
    expect(p.flow.wallets()).toEqual({
      options: [info("a", "Alpha"), info("b", "Beta")],
      current: null,
      picking: true,
    });
    expect(p.view().stage).toBe("open:waiting"); // the page itself waits for the choice
    expect([...first.calls, ...second.calls]).toEqual([]);

    await p.flow.chooseWallet("b");
    expect(second.calls).toEqual(["eth_requestAccounts", "eth_chainId", "eth_signTypedData_v4"]);
    expect(first.calls).toEqual([]);
    expect(p.posted).toEqual([PAYER_B]);
    expect(p.flow.wallets()).toMatchObject({ current: info("b", "Beta"), picking: false });
    expect(remembered.value()).toBe("com.example.b");

    // The choice holds for the rest of the page: paying again asks no question.
    await p.flow.payTransfer().catch(() => undefined);
    expect(p.flow.wallets().picking).toBe(false);
    expect(first.calls).toEqual([]);
  });

  it("uses the only wallet without asking, and the wallet chosen earlier in the tab's session", async () => {
    const only = fakeProvider(PAYER_A);
    const one = page();
    announce(one.target, { info: info("a", "Alpha"), provider: only.provider });
    await one.flow.load();
    await one.flow.payGasless();
    expect(one.seen.some((w) => w.picking)).toBe(false);
    expect(one.posted).toEqual([PAYER_A]);

    const first = fakeProvider(PAYER_A);
    const second = fakeProvider(PAYER_B);
    const again = page({ memory: memory("com.example.b") });
    announce(again.target, { info: info("a", "Alpha"), provider: first.provider });
    announce(again.target, { info: info("b", "Beta"), provider: second.provider });
    await again.flow.load();
    await again.flow.payGasless();
    expect(again.seen.some((w) => w.picking)).toBe(false);
    expect(again.posted).toEqual([PAYER_B]);
    expect(first.calls).toEqual([]);
  });

  it("ignores window.ethereum once wallets announce themselves, and uses it when none does", async () => {
    const injected = fakeProvider(PAYER_A);
    const announced = fakeProvider(PAYER_B);
    const both = page({ ethereum: injected.provider });
    announce(both.target, { info: info("b", "Beta"), provider: announced.provider });
    await both.flow.load();
    await both.flow.payGasless();
    expect(both.posted).toEqual([PAYER_B]);
    expect(injected.calls).toEqual([]);

    const legacy = fakeProvider(PAYER_A);
    const alone = page({ ethereum: legacy.provider });
    await alone.flow.load();
    await alone.flow.payGasless();
    expect(alone.posted).toEqual([PAYER_A]);
    expect(alone.flow.wallets().current).toEqual(INJECTED_WALLET);
  });

  it("shows a wallet that announces itself while the customer chooses; cancelling asks nothing of any", async () => {
    const first = fakeProvider(PAYER_A);
    const second = fakeProvider(PAYER_B);
    const late = fakeProvider(PAYER_A);
    const p = page();
    announce(p.target, { info: info("a", "Alpha"), provider: first.provider });
    announce(p.target, { info: info("b", "Beta"), provider: second.provider });
    await p.flow.load();
    await p.flow.payGasless();
    announce(p.target, { info: info("c", "Late"), provider: late.provider });
    expect(p.seen.at(-1)?.options.map((o) => o.name)).toEqual(["Alpha", "Beta", "Late"]);
    p.flow.cancelWalletChoice();
    expect(p.flow.wallets()).toMatchObject({ picking: false, current: null });
    expect(p.view().action?.kind).toBe("pay_gasless");
    expect([...first.calls, ...second.calls, ...late.calls]).toEqual([]);
    expect(p.posted).toEqual([]);

    // "Use another wallet" after a choice: the picker again, and the next payment uses the new one.
    await p.flow.payGasless();
    await p.flow.chooseWallet("a");
    p.flow.changeWallet();
    expect(p.flow.wallets().picking).toBe(true);
    await p.flow.chooseWallet("c");
    expect(p.flow.wallets().current?.name).toBe("Late");
    expect(late.calls).toEqual([]);
  });

  it("waits a moment for a wallet that injects itself late, then says there is none", async () => {
    const late = fakeProvider(PAYER_A);
    let slept = 0;
    const waiting = page({
      sleep: async (target) => {
        slept += 1;
        if (slept === 3) announce(target, { info: info("a", "Alpha"), provider: late.provider });
      },
    });
    await waiting.flow.load();
    await waiting.flow.payGasless();
    expect(slept).toBe(3);
    expect(waiting.posted).toEqual([PAYER_A]);

    const none = page();
    await none.flow.load();
    await none.flow.payGasless();
    expect(none.view().error?.title).toBe("No wallet found");
  });
});
