/**
 * The hosted pages' browser tests' shared parts: headless Chromium (Debian's, driven by playwright-core)
 * and an injected EIP-1193 wallet whose requests go to Node: it signs with a real key (viem) and
 * forwards chain calls to the stack's anvil, and each test configures it to reject, sit on another
 * chain, lack the chain, or hold another account. Used by authorization-page.test.ts and pay-page.test.ts.
 */
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
  readonly rpcUrl = chainRpcUrl();

  constructor(options: WalletOptions = {}) {
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

/** Runs in the page before its scripts: `window.ethereum` forwards every request to the Node wallet. */
export const injectProvider = () => {
  const bridge = () =>
    (window as unknown as { __testWallet: (json: string) => Promise<string> }).__testWallet;
  Object.defineProperty(window, "ethereum", {
    configurable: true,
    value: {
      request: async (args: { method: string; params?: unknown[] }) => {
        const answer = JSON.parse(await bridge()(JSON.stringify(args))) as {
          result?: unknown;
          error?: { code: number; message: string };
        };
        if (answer.error) throw Object.assign(new Error(answer.error.message), { code: answer.error.code });
        return answer.result;
      },
    },
  });
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
   * A fresh browser context with the wallet injected (or none), on `url`. `popup`: opened by a script
   * of another page, as a merchant's checkout does with window.open (browsers let scripts close only
   * such tabs, or tabs with a single history entry, which a page driven by Playwright's goto is not).
   * `clipboard`: the page may read and write the clipboard.
   */
  const openPage = async (
    url: string,
    wallet: TestWallet | null,
    { popup = false, clipboard = false } = {},
  ): Promise<Page> => {
    const context = await browser.newContext({ viewport: { width: 760, height: 1000 } });
    if (clipboard)
      await context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: new URL(url).origin });
    if (wallet) {
      await context.exposeFunction("__testWallet", (json: string) => wallet.handle(json));
      await context.addInitScript(injectProvider);
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

  return {
    openPage,
    shot: (page: Page, name: string) => page.screenshot({ path: `${shots}/${name}.png`, fullPage: true }),
    button: (page: Page, name: string) => page.getByRole("button", { name, exact: true }),
    focusedText: (page: Page) => page.evaluate(() => document.activeElement?.textContent?.trim() ?? ""),
    expectNoProblems: () => {
      expect(problems.splice(0)).toEqual([]);
    },
  };
};
