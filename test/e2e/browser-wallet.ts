/**
 * The hosted pages' browser tests' shared parts: headless Chromium (Debian's, driven by playwright-core)
 * and injected EIP-1193 wallets whose requests go to Node: each signs with a real key (viem) and
 * forwards chain calls to the stack's anvil, and each test configures it to reject, sit on another
 * chain, lack the chain, or hold another account. A page gets one wallet as `window.ethereum`, or
 * several that announce themselves by EIP-6963 (each with its own name, icon, account and call log, some
 * of them late), with or without `window.ethereum`. Used by authorization-page.test.ts and pay-page.test.ts.
 */
import { randomUUID } from "node:crypto";
import { mkdirSync, readFileSync } from "node:fs";
import { type Browser, chromium, type Page } from "playwright-core";
import { createWalletClient, defineChain, type Hex, http } from "viem";
import { generatePrivateKey, type PrivateKeyAccount, privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, expect } from "vitest";
import { CHROMIUM_ARGS, ensureChromium } from "../../scripts/browser/chromium.ts";
import type { ResolvedChain } from "../../service/chains/config.ts";
import { stack } from "./helpers.ts";

export const CHAIN_ID = 31337;
export const OTHER_CHAIN_ID = 1;

// ---------------------------------------------------------------------------------------------------
// The test wallet

export interface WalletOptions {
  /** The account's key (default: a fresh one, with no ETH: the permit flow is gasless). */
  readonly key?: Hex;
  /** The chain the wallet is on at first (default: the mandate's chain). */
  readonly chainId?: number;
  /** Chains the wallet knows; switching to another one fails with 4902 (default: both). */
  readonly knownChains?: readonly number[];
  /** Reject this many signature requests with 4001 (the customer clicks "Reject"). */
  readonly rejectSignatures?: number;
  /** Reject wallet_addEthereumChain with 4001. */
  readonly rejectAddChain?: boolean;
  /** The chain's RPC URL (default: the test stack's chain 31337). */
  readonly rpcUrl?: string;
}

interface RpcError {
  readonly code: number;
  readonly message: string;
}

const rpcError = (code: number, message: string): RpcError => ({ code, message });
const isRpcError = (value: unknown): value is RpcError =>
  typeof value === "object" && value !== null && typeof (value as { code?: unknown }).code === "number";

/** The local chain's RPC URL in the running stack. */
export const chainRpcUrl = () => {
  const chains = (JSON.parse(readFileSync(stack().chainsFile, "utf8")) as { chains: ResolvedChain[] }).chains;
  const url = chains.find((c) => c.id === CHAIN_ID)?.rpc.http[0];
  if (!url) throw new Error(`no RPC URL for chain ${CHAIN_ID} in the stack`);
  return url;
};

export class TestWallet {
  account: PrivateKeyAccount;
  chainId: number;
  readonly known: Set<number>;
  rejections: number;
  readonly rejectAddChain: boolean;
  readonly calls: Array<{ readonly method: string; readonly params: readonly unknown[] }> = [];
  /** Runs when a signature is requested, before answering (e.g. to screenshot the waiting page). */
  onSign: (() => Promise<void>) | null = null;
  readonly rpcUrl: string;

  constructor(options: WalletOptions = {}) {
    this.rpcUrl = options.rpcUrl ?? chainRpcUrl();
    this.account = privateKeyToAccount(options.key ?? generatePrivateKey());
    this.chainId = options.chainId ?? CHAIN_ID;
    this.known = new Set(options.knownChains ?? [CHAIN_ID, OTHER_CHAIN_ID]);
    this.rejections = options.rejectSignatures ?? 0;
    this.rejectAddChain = options.rejectAddChain ?? false;
  }

  get address() {
    return this.account.address;
  }

  useAccount(key: Hex) {
    this.account = privateKeyToAccount(key);
  }

  methods() {
    return this.calls.map((call) => call.method);
  }

  /** Answers one EIP-1193 request from the page: `{result}` or `{error: {code, message}}`, as JSON. */
  async handle(requestJson: string): Promise<string> {
    const { method, params = [] } = JSON.parse(requestJson) as { method: string; params?: unknown[] };
    this.calls.push({ method, params });
    try {
      return JSON.stringify({ result: (await this.answer(method, params)) ?? null });
    } catch (error) {
      return JSON.stringify({
        error: isRpcError(error)
          ? error
          : rpcError(-32603, error instanceof Error ? error.message : String(error)),
      });
    }
  }

  private async answer(method: string, params: unknown[]): Promise<unknown> {
    switch (method) {
      case "eth_requestAccounts":
      case "eth_accounts":
        return [this.address];
      case "eth_chainId":
        return `0x${this.chainId.toString(16)}`;
      case "wallet_switchEthereumChain": {
        const target = Number((params[0] as { chainId: string }).chainId);
        if (!this.known.has(target))
          throw rpcError(4902, `Unrecognized chain ID "0x${target.toString(16)}".`);
        this.chainId = target;
        return null;
      }
      case "wallet_addEthereumChain": {
        if (this.rejectAddChain) throw rpcError(4001, "User rejected the request.");
        const target = Number((params[0] as { chainId: string }).chainId);
        this.known.add(target);
        this.chainId = target;
        return null;
      }
      case "eth_signTypedData_v4": {
        await this.onSign?.();
        if (this.rejections > 0) {
          this.rejections -= 1;
          throw rpcError(4001, "User rejected the request.");
        }
        if (String(params[0]).toLowerCase() !== this.address.toLowerCase())
          throw rpcError(4100, "The requested account has not been authorized by the user.");
        const typed = JSON.parse(String(params[1])) as {
          domain: Record<string, unknown>;
          types: Record<string, Array<{ name: string; type: string }>>;
          primaryType: string;
          message: Record<string, unknown>;
        };
        const { EIP712Domain: _domain, ...types } = typed.types;
        return this.account.signTypedData({
          domain: typed.domain,
          types,
          primaryType: typed.primaryType,
          message: typed.message,
        } as Parameters<PrivateKeyAccount["signTypedData"]>[0]);
      }
      case "eth_sendTransaction": {
        const tx = params[0] as { to: Hex; data?: Hex; value?: Hex };
        const chain = defineChain({
          id: CHAIN_ID,
          name: "test",
          nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
          rpcUrls: { default: { http: [this.rpcUrl] } },
        });
        const wallet = createWalletClient({ chain, transport: http(this.rpcUrl), account: this.account });
        return wallet.sendTransaction({
          to: tx.to,
          ...(tx.data ? { data: tx.data } : {}),
          ...(tx.value ? { value: BigInt(tx.value) } : {}),
        });
      }
      default: {
        const response = await fetch(this.rpcUrl, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }),
        });
        const body = (await response.json()) as { result?: unknown; error?: RpcError };
        if (body.error) throw body.error;
        return body.result;
      }
    }
  }
}

/** A wallet that announces itself by EIP-6963, as a test puts it in the browser. */
export interface AnnouncedWallet {
  readonly wallet: TestWallet;
  readonly name: string;
  readonly rdns: string;
  /** The icon as the wallet gives it (default: a coloured square, an SVG data URI). */
  readonly icon?: string;
  /** Default: a fresh UUID. A second announcement with the same uuid must be ignored by the page. */
  readonly uuid?: string;
  /** Announces itself only this long after the page started (a wallet that injects itself late). */
  readonly delayMs?: number;
  /** Announces itself only when the test calls `announceLater(page)`. */
  readonly later?: boolean;
}

/** The wallets in a test's browser: announced ones, and the one behind `window.ethereum` (or none). */
export interface BrowserWallets {
  readonly announce: readonly AnnouncedWallet[];
  readonly ethereum?: TestWallet | null;
}

/** A square of `color` as an SVG data URI: what wallets' icons look like. */
export const squareIcon = (color: string) =>
  `data:image/svg+xml,${encodeURIComponent(
    `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><rect width="32" height="32" rx="6" fill="${color}"/></svg>`,
  )}`;

/** What the page's init script gets (JSON): wallets by index into the Node side's list. */
interface InjectionSetup {
  readonly announce: ReadonlyArray<{
    readonly wallet: number;
    readonly info: {
      readonly uuid: string;
      readonly name: string;
      readonly icon: string;
      readonly rdns: string;
    };
    readonly delayMs: number;
    readonly later: boolean;
  }>;
  readonly ethereum: number | null;
}

/**
 * Runs in the page before its scripts: one EIP-1193 provider per wallet, forwarding every request to its
 * Node wallet; `window.ethereum` if the test wants one; EIP-6963 announcements at start (or after the
 * wallet's delay) and again on each `eip6963:requestProvider`, as wallet extensions do.
 */
export const injectWallets = (setup: InjectionSetup) => {
  type Bridge = (index: number, json: string) => Promise<string>;
  const bridge = () => (window as unknown as { __testWallet: Bridge }).__testWallet;
  const providers = new Map<number, object>();
  const provider = (index: number) => {
    const known = providers.get(index);
    if (known) return known;
    const created = {
      request: async (args: { method: string; params?: unknown[] }) => {
        const answer = JSON.parse(await bridge()(index, JSON.stringify(args))) as {
          result?: unknown;
          error?: { code: number; message: string };
        };
        if (answer.error) throw Object.assign(new Error(answer.error.message), { code: answer.error.code });
        return answer.result;
      },
    };
    providers.set(index, created);
    return created;
  };
  if (setup.ethereum !== null)
    Object.defineProperty(window, "ethereum", { configurable: true, value: provider(setup.ethereum) });
  const ready: Array<InjectionSetup["announce"][number]> = [];
  const later: Array<() => void> = [];
  const announce = (entry: InjectionSetup["announce"][number]) =>
    window.dispatchEvent(
      new CustomEvent("eip6963:announceProvider", {
        detail: Object.freeze({ info: Object.freeze({ ...entry.info }), provider: provider(entry.wallet) }),
      }),
    );
  for (const entry of setup.announce) {
    const start = () => {
      ready.push(entry);
      announce(entry);
    };
    if (entry.later) later.push(start);
    else if (entry.delayMs > 0) setTimeout(start, entry.delayMs);
    else start();
  }
  Object.defineProperty(window, "__announceLater", {
    value: () => {
      for (const start of later.splice(0)) start();
    },
  });
  window.addEventListener("eip6963:requestProvider", () => {
    for (const entry of ready) announce(entry);
  });
};

/** The wallets marked `later` announce themselves now (while the page runs). */
export const announceLater = (page: Page) =>
  page.evaluate(() => (window as unknown as { __announceLater: () => void }).__announceLater());

const COLORS = ["#f6851b", "#7084ff", "#0052ff", "#16a34a", "#db2777"];

/** The wallets of `wallets` (a lone TestWallet is `window.ethereum`) as the init script's setup. */
const injection = (wallets: TestWallet | BrowserWallets) => {
  const given: BrowserWallets = wallets instanceof TestWallet ? { announce: [], ethereum: wallets } : wallets;
  const all: TestWallet[] = [];
  const indexOf = (wallet: TestWallet) => {
    if (!all.includes(wallet)) all.push(wallet);
    return all.indexOf(wallet);
  };
  const setup: InjectionSetup = {
    announce: given.announce.map((entry, i) => ({
      wallet: indexOf(entry.wallet),
      info: {
        uuid: entry.uuid ?? randomUUID(),
        name: entry.name,
        icon: entry.icon ?? squareIcon(COLORS[i % COLORS.length] ?? "#888"),
        rdns: entry.rdns,
      },
      delayMs: entry.delayMs ?? 0,
      later: entry.later ?? false,
    })),
    ethereum: given.ethereum ? indexOf(given.ethereum) : null,
  };
  return { setup, handle: (index: number, json: string) => (all[index] as TestWallet).handle(json) };
};

// ---------------------------------------------------------------------------------------------------
// Browser and pages

/**
 * One browser for a test file (launched before its tests, closed after them), pages on it, and the
 * page errors and CSP refusals they logged. Screenshots go to `shots` (a test artifact, gitignored).
 */
export const hostedPageBrowser = (shots: string) => {
  let browser: Browser;
  const problems: string[] = [];

  beforeAll(async () => {
    mkdirSync(shots, { recursive: true });
    browser = await chromium.launch({ executablePath: await ensureChromium(), args: [...CHROMIUM_ARGS] });
  });

  afterAll(async () => {
    await browser?.close();
  });

  /**
   * A fresh browser context with the wallets injected (a lone TestWallet as `window.ethereum`; or
   * announced ones; or none), on `url`. `popup`: opened by a script
   * of another page, as a merchant's checkout does with window.open (browsers let scripts close only
   * such tabs, or tabs with a single history entry, which a page driven by Playwright's goto is not).
   * `clipboard`: the page may read and write the clipboard. `fakeClock`: the page's timers and time run
   * only when the test moves them (`page.clock.runFor`), from the real time at the start.
   */
  const openPage = async (
    url: string,
    wallets: TestWallet | BrowserWallets | null,
    { popup = false, clipboard = false, fakeClock = false } = {},
  ): Promise<Page> => {
    const context = await browser.newContext({ viewport: { width: 760, height: 1000 } });
    if (fakeClock) await context.clock.install();
    if (clipboard)
      await context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: new URL(url).origin });
    if (wallets) {
      const { setup, handle } = injection(wallets);
      await context.exposeFunction("__testWallet", handle);
      await context.addInitScript(injectWallets, setup);
    }
    let page = await context.newPage();
    if (popup) {
      const opener = page;
      const opened = context.waitForEvent("page");
      await opener.evaluate((target) => {
        window.open(target, "_blank");
      }, url);
      page = await opened;
    }
    page.on("pageerror", (error) => problems.push(`page error: ${error.message}`));
    page.on("console", (message) => {
      if (/Content Security Policy|Refused to/i.test(message.text()))
        problems.push(`console: ${message.text()}`);
    });
    page.on("close", () => {
      void context.close().catch(() => undefined);
    });
    if (popup) await page.waitForLoadState();
    else await page.goto(url);
    return page;
  };

  const shot = (page: Page, name: string) =>
    page.screenshot({ path: `${shots}/${name}.png`, fullPage: true });
  const focusedText = (page: Page) => page.evaluate(() => document.activeElement?.textContent?.trim() ?? "");
  /** From now on, the page's calls to `window.close` are counted (`closeCalls`) instead of closing it. */
  const countCloseCalls = (page: Page) =>
    page.evaluate(() => {
      const counted = window as Window & { closeCalls?: number };
      counted.closeCalls = 0;
      counted.close = () => {
        counted.closeCalls = (counted.closeCalls ?? 0) + 1;
      };
    });
  const closeCalls = (page: Page) =>
    page.evaluate(() => (window as Window & { closeCalls?: number }).closeCalls ?? 0);

  /**
   * A finished page's 30-second countdown (`?close=1&delay=30` on `url`), on the page's own clock: its
   * picture, "Keep this tab open" focused, and 60 s of the page's time after it with no call to
   * window.close, where the same countdown left alone calls it once.
   */
  const expectKeepOpen = async (url: string) => {
    const kept = await openPage(`${url}?close=1&delay=30`, null, { fakeClock: true });
    await countCloseCalls(kept);
    const countdown = kept.locator("#countdown");
    await countdown.filter({ hasText: "This tab will close in 30 seconds." }).waitFor();
    await kept.clock.runFor(1000);
    await countdown.filter({ hasText: "This tab will close in 29 seconds." }).waitFor();
    await shot(kept, "closing");
    expect(await focusedText(kept)).toBe("Keep this tab open");
    await kept.keyboard.press("Enter");
    await countdown.waitFor({ state: "hidden" });
    await kept.clock.runFor(60_000);
    expect(await closeCalls(kept)).toBe(0);
    await kept.close();
    const alone = await openPage(`${url}?close=1&delay=30`, null, { fakeClock: true });
    await countCloseCalls(alone);
    await alone.locator("#countdown").filter({ hasText: "This tab will close in 30 seconds." }).waitFor();
    await alone.clock.runFor(31_000);
    expect(await closeCalls(alone)).toBe(1);
    await alone.close();
  };

  return {
    openPage,
    shot,
    button: (page: Page, name: string) => page.getByRole("button", { name, exact: true }),
    focusedText,
    expectKeepOpen,
    expectNoProblems: () => {
      expect(problems.splice(0)).toEqual([]);
    },
  };
};
