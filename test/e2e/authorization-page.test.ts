/**
 * The hosted authorization page in headless Chromium (Debian's, driven by playwright-core) against the
 * real stack. The wallet is an injected EIP-1193 provider whose requests go to Node: it signs with a
 * real key (viem) and forwards chain calls to the stack's anvil, and each test configures it to
 * reject, sit on another chain, lack the chain, or hold another account.
 * Screenshots of each state go to test-results/authorization-page/ (a test artifact, gitignored).
 */
import { mkdirSync, readFileSync } from "node:fs";
import { type Browser, chromium, type Page } from "playwright-core";
import { createWalletClient, defineChain, type Hex, http } from "viem";
import { generatePrivateKey, type PrivateKeyAccount, privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CHROMIUM_ARGS, ensureChromium } from "../../scripts/browser/chromium.ts";
import { waitFor } from "../../scripts/stack/wait.ts";
import type { ResolvedChain } from "../../service/chains/config.ts";
import { api, stack } from "./helpers.ts";

const SHOTS = "test-results/authorization-page";
const CHAIN_ID = 31337;
const OTHER_CHAIN_ID = 1;

// ---------------------------------------------------------------------------------------------------
// The test wallet

interface WalletOptions {
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

const chainRpcUrl = () => {
  const chains = (JSON.parse(readFileSync(stack().chainsFile, "utf8")) as { chains: ResolvedChain[] }).chains;
  const url = chains.find((c) => c.id === CHAIN_ID)?.rpc.http[0];
  if (!url) throw new Error(`no RPC URL for chain ${CHAIN_ID} in the stack`);
  return url;
};

class TestWallet {
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
const injectProvider = () => {
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
// Browser, pages and the API

let browser: Browser;
const problems: string[] = [];

beforeAll(async () => {
  mkdirSync(SHOTS, { recursive: true });
  browser = await chromium.launch({ executablePath: await ensureChromium(), args: [...CHROMIUM_ARGS] });
});

afterAll(async () => {
  await browser?.close();
});

/**
 * A fresh browser context with the wallet injected (or none), on `url`. `popup`: opened by a script of
 * another page, as a merchant's checkout does with window.open (browsers let scripts close only such
 * tabs, or tabs with a single history entry, which a page driven by Playwright's goto is not).
 */
const openPage = async (url: string, wallet: TestWallet | null, { popup = false } = {}): Promise<Page> => {
  const context = await browser.newContext({ viewport: { width: 760, height: 1000 } });
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

const shot = (page: Page, name: string) => page.screenshot({ path: `${SHOTS}/${name}.png`, fullPage: true });

const button = (page: Page, name: string) => page.getByRole("button", { name, exact: true });

const waitForDone = (page: Page) =>
  page.getByRole("heading", { name: "You're all set" }).waitFor({ timeout: 60_000 });

/** The customer's path with a mouse: connect, sign, wait until confirmed. */
const signOnPage = async (page: Page) => {
  await button(page, "Connect wallet").click();
  await button(page, "Sign and authorize").click();
  await waitForDone(page);
};

interface Mandate {
  readonly id: string;
  readonly authorization_url: string;
  readonly status: string;
  readonly customer_address: string | null;
}

const newMandate = async (extra: Record<string, unknown> = {}): Promise<Mandate> => {
  const response = await api("/v1/mandates", {
    body: { cap_decimal: "25", period: "month", customer: "cus_1", reference: "ord_1", ...extra },
  });
  expect(response.status, response.text).toBeLessThan(300);
  expect(response.json.authorization_url).toMatch(/\/authorize\/[A-Za-z0-9_-]{20,80}$/);
  return response.json as Mandate;
};

const mandate = async (id: string): Promise<Mandate> => (await api(`/v1/mandates/${id}`)).json as Mandate;

const waitForStatus = (id: string, status: string) =>
  waitFor(async () => (await mandate(id)).status === status, {
    timeoutMs: 60_000,
    intervalMs: 200,
    what: `mandate ${id} to be ${status}`,
  });

const authorizedEvents = async (id: string) =>
  ((await api("/v1/events?type=mandate.authorized&limit=100")).json?.data ?? []).filter(
    (event: { data: { object: { id: string } } }) => event.data.object.id === id,
  );

const chargeAndWait = async (id: string, amount: string) => {
  const created = await api(`/v1/mandates/${id}/charges`, { body: { amount_decimal: amount } });
  expect(created.status, created.text).toBeLessThan(300);
  if (created.json.status === "failed") return created.json;
  let charge = created.json;
  await waitFor(
    async () => {
      charge = (await api(`/v1/charges/${created.json.id}`)).json;
      return charge.status === "succeeded" || charge.status === "failed";
    },
    { timeoutMs: 60_000, intervalMs: 200, what: `charge ${created.json.id} to settle` },
  );
  return charge;
};

const focusedText = (page: Page) => page.evaluate(() => document.activeElement?.textContent?.trim() ?? "");

const expectNoProblems = () => {
  expect(problems.splice(0)).toEqual([]);
};

// ---------------------------------------------------------------------------------------------------

describe("hosted authorization page", () => {
  it("shows the terms in plain words, signs terms and permit, and ends in mandate.authorized", async () => {
    const created = await newMandate();
    const wallet = new TestWallet();
    const page = await openPage(created.authorization_url, wallet);

    await button(page, "Connect wallet").waitFor();
    const card = page.locator(".card");
    await expect.poll(() => card.textContent()).toContain("Up to 25 USDC per month");
    const text = await card.textContent();
    expect(text).toContain("300 USDC in total over 12 months, then you'll be asked to sign again");
    expect(text).toContain("Local test chain");
    expect(text).toContain("Each payment is held in escrow for 1 hour");
    expect(text).toContain("Test mode");
    await shot(page, "connect");

    let signRequests = 0;
    wallet.onSign = async () => {
      signRequests += 1;
      if (signRequests === 1) {
        await page.getByRole("status").filter({ hasText: "Sign the terms in your wallet." }).waitFor();
        await shot(page, "signing");
      }
    };
    await signOnPage(page);
    await shot(page, "done");

    // Terms, then the permit, both from the connected account; no transaction from the customer.
    expect(wallet.methods().filter((m) => m === "eth_signTypedData_v4")).toHaveLength(2);
    const [terms, permit] = wallet.calls
      .filter((c) => c.method === "eth_signTypedData_v4")
      .map((c) => JSON.parse(String(c.params[1])) as { primaryType: string });
    expect([terms?.primaryType, permit?.primaryType]).toEqual(["Terms", "Permit"]);
    expect(wallet.methods()).not.toContain("eth_sendTransaction");
    expect(wallet.methods()).not.toContain("wallet_switchEthereumChain");

    await waitFor(async () => (await authorizedEvents(created.id)).length === 1, {
      timeoutMs: 60_000,
      intervalMs: 250,
      what: `mandate.authorized for ${created.id}`,
    });
    const active = await mandate(created.id);
    expect(active.status).toBe("active");
    expect(active.customer_address?.toLowerCase()).toBe(wallet.address.toLowerCase());

    // The page stays open in the done state, also when opened again.
    await page.reload();
    await waitForDone(page);
    expect(await button(page, "Connect wallet").count()).toBe(0);
    await page.close();
    expectNoProblems();
  });

  it("asks to sign again after approval_exhausted, refuses another account clearly, and charges again", async () => {
    const created = await newMandate({ approval_periods: 1 });
    const customerKey = generatePrivateKey();
    const first = await openPage(created.authorization_url, new TestWallet({ key: customerKey }));
    await expect.poll(() => first.locator(".card").textContent()).toContain("25 USDC in total over 1 month");
    await signOnPage(first);
    await first.close();
    await waitForStatus(created.id, "active");

    const funded = await api(`/v1/test/mandates/${created.id}/fund`, { body: { amount_decimal: "100" } });
    expect(funded.status, funded.text).toBeLessThan(300);
    expect((await chargeAndWait(created.id, "25")).status).toBe("succeeded");
    const advanced = await api("/v1/test/clock/advance", { body: { seconds: 2_678_400 } });
    expect(advanced.status, advanced.text).toBeLessThan(300);
    const exhausted = await api(`/v1/mandates/${created.id}/charges`, { body: { amount_decimal: "25" } });
    expect(exhausted.json).toMatchObject({ status: "failed", failure_code: "approval_exhausted" });
    await waitForStatus(created.id, "requires_authorization");

    // Another account is refused before anything is signed, naming the account to switch to.
    const wallet = new TestWallet();
    const page = await openPage(created.authorization_url, wallet);
    await page.getByRole("heading", { name: /Renew your payments/ }).waitFor();
    await button(page, "Connect wallet").click();
    const alert = page.getByRole("alert");
    await alert.getByText("Wrong account").waitFor();
    const bound = (await mandate(created.id)).customer_address ?? "";
    expect(await alert.textContent()).toContain(
      `This authorization belongs to the account ${bound}, not to ${wallet.address}. Switch your wallet to that account`,
    );
    expect(await focusedText(page)).toContain("Wrong account");
    await shot(page, "error-wrong-account");
    expect(wallet.methods()).not.toContain("eth_signTypedData_v4");

    // The customer switches to the bound account in the wallet and tries again.
    wallet.useAccount(customerKey);
    await button(page, "Try again").click();
    await button(page, "Sign and authorize").click();
    await waitForDone(page);
    await waitForStatus(created.id, "active");
    expect((await chargeAndWait(created.id, "25")).status).toBe("succeeded");
    await page.close();
    expectNoProblems();
  });

  it("closes the tab after the countdown with ?close=1&delay=1", async () => {
    const created = await newMandate();
    const page = await openPage(`${created.authorization_url}?close=1&delay=1`, new TestWallet(), {
      popup: true,
    });
    const closed = new Promise<void>((resolve) => page.once("close", () => resolve()));
    await signOnPage(page);
    const started = Date.now();
    await closed;
    expect(Date.now() - started).toBeLessThan(10_000);

    // A longer countdown on the finished page, for its picture and its "keep open".
    const again = await openPage(`${created.authorization_url}?close=1&delay=30`, null);
    const countdown = again.locator("#countdown");
    await countdown.filter({ hasText: "This tab will close in 30 seconds." }).waitFor();
    await countdown.filter({ hasText: "This tab will close in 29 seconds." }).waitFor();
    await shot(again, "closing");
    expect(await focusedText(again)).toBe("Keep this tab open");
    await again.keyboard.press("Enter");
    await countdown.waitFor({ state: "hidden" });
    await again.waitForTimeout(1500);
    expect(again.isClosed()).toBe(false);
    await again.close();
    expectNoProblems();
  });

  it("shows a declined signature with a retry that then succeeds", async () => {
    const created = await newMandate();
    const wallet = new TestWallet({ rejectSignatures: 1 });
    const page = await openPage(created.authorization_url, wallet);
    await button(page, "Connect wallet").click();
    await button(page, "Sign and authorize").click();
    const alert = page.getByRole("alert");
    await alert.getByText("Signature declined").waitFor();
    expect(await alert.textContent()).toContain(
      "You declined to sign the terms in your wallet. Nothing was authorized.",
    );
    expect(await focusedText(page)).toContain("Signature declined");
    await shot(page, "error-rejected");

    await button(page, "Try again").click();
    await waitForDone(page);
    await waitForStatus(created.id, "active");
    await page.close();
    expectNoProblems();
  });

  it("adds the chain when the wallet lacks it, and says so when the wallet refuses to add it", async () => {
    const created = await newMandate();
    const adding = new TestWallet({ chainId: OTHER_CHAIN_ID, knownChains: [OTHER_CHAIN_ID] });
    const page = await openPage(created.authorization_url, adding);
    await signOnPage(page);
    const session = (await (await fetch(`${created.authorization_url}/session`)).json()) as {
      chain: { rpc_url: string | null; name: string };
    };
    const add = adding.calls.find((c) => c.method === "wallet_addEthereumChain");
    expect(add?.params[0]).toMatchObject({
      chainId: `0x${CHAIN_ID.toString(16)}`,
      chainName: session.chain.name,
      rpcUrls: [session.chain.rpc_url],
      nativeCurrency: { symbol: "ETH", decimals: 18 },
    });
    expect(adding.chainId).toBe(CHAIN_ID);
    await page.close();

    const other = await newMandate();
    const refusing = new TestWallet({
      chainId: OTHER_CHAIN_ID,
      knownChains: [OTHER_CHAIN_ID],
      rejectAddChain: true,
    });
    const refused = await openPage(other.authorization_url, refusing);
    await button(refused, "Connect wallet").click();
    const alert = refused.getByRole("alert");
    await alert.getByText(`Add ${session.chain.name} to your wallet`).waitFor();
    expect(await alert.textContent()).toContain(
      `Your wallet doesn't know ${session.chain.name} (chain ID ${CHAIN_ID}), and adding it was declined. Add this network to your wallet, then try again.`,
    );
    await shot(refused, "error-chain");
    expect(refusing.methods()).not.toContain("eth_signTypedData_v4");
    await refused.close();
    expectNoProblems();
  });

  it("says when no wallet is installed, and answers an unknown link with a readable 404 page", async () => {
    const created = await newMandate();
    const page = await openPage(created.authorization_url, null);
    const alert = page.getByRole("alert");
    await alert.getByText("No wallet found").waitFor();
    expect(await page.locator(".card").textContent()).toContain("Up to 25 USDC per month");
    await shot(page, "error-no-wallet");
    await page.close();

    const unknown = `${stack().apiUrl}/authorize/${"x".repeat(32)}`;
    const response = await fetch(unknown);
    expect(response.status).toBe(404);
    expect(response.headers.get("content-type")).toMatch(/^text\/html/);
    const missing = await openPage(unknown, null);
    await missing.getByRole("heading", { name: "Authorization not found" }).waitFor();
    await shot(missing, "not-found");
    await missing.close();
    expectNoProblems();
  });

  it("can be completed with the keyboard alone, switching the wallet's chain", async () => {
    const created = await newMandate();
    const wallet = new TestWallet({ chainId: OTHER_CHAIN_ID });
    const page = await openPage(created.authorization_url, wallet);
    await button(page, "Connect wallet").waitFor();

    for (let i = 0; i < 10 && (await focusedText(page)) !== "Connect wallet"; i += 1)
      await page.keyboard.press("Tab");
    expect(await focusedText(page)).toBe("Connect wallet");
    // The focused button shows a visible focus ring.
    const outline = await page.evaluate(() => {
      const style = getComputedStyle(document.activeElement as Element);
      return { style: style.outlineStyle, width: Number.parseFloat(style.outlineWidth) };
    });
    expect(outline.style).toBe("solid");
    expect(outline.width).toBeGreaterThanOrEqual(2);
    await page.keyboard.press("Enter");

    // Focus moves to the next action once the wallet is connected and on the right chain.
    await expect.poll(() => focusedText(page), { timeout: 30_000 }).toBe("Sign and authorize");
    expect(wallet.methods()).toContain("wallet_switchEthereumChain");
    expect(wallet.chainId).toBe(CHAIN_ID);
    await page.keyboard.press("Enter");
    await waitForDone(page);
    await waitForStatus(created.id, "active");
    await page.close();
    expectNoProblems();
  });
});
