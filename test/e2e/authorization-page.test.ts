/**
 * The hosted authorization page in headless Chromium (Debian's, driven by playwright-core) against the
 * real stack, with the injected test wallet of browser-wallet.ts.
 * Screenshots of each state go to test-results/authorization-page/ (a test artifact, gitignored).
 */
import type { Page } from "playwright-core";
import { generatePrivateKey } from "viem/accounts";
import { describe, expect, it } from "vitest";
import { waitFor } from "../../scripts/stack/wait.ts";
import { CHAIN_ID, hostedPageBrowser, OTHER_CHAIN_ID, squareIcon, TestWallet } from "./browser-wallet.ts";
import { api, stack } from "./helpers.ts";

const { openPage, shot, button, focusedText, expectKeepOpen, expectNoProblems } = hostedPageBrowser(
  "test-results/authorization-page",
);

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

  it("lets the customer pick one of several EIP-6963 wallets, signs with that one alone, and keeps the choice", async () => {
    const created = await newMandate();
    const first = new TestWallet();
    const second = new TestWallet({ chainId: OTHER_CHAIN_ID, rejectSignatures: 1 });
    const hostile = new TestWallet();
    const hostileName = "<img src=x onerror=alert(1)>Hostile";
    const icons = { first: squareIcon("#f6851b"), second: squareIcon("#7084ff") };
    // No window.ethereum: only the announced wallets.
    const page = await openPage(created.authorization_url, {
      announce: [
        { wallet: first, name: "First Wallet", rdns: "com.example.first", icon: icons.first },
        { wallet: second, name: "Second Wallet", rdns: "com.example.second", icon: icons.second },
        { wallet: hostile, name: hostileName, rdns: "com.example.hostile", icon: "javascript:alert(1)" },
      ],
    });
    const dialogs: string[] = [];
    page.on("dialog", (dialog) => {
      dialogs.push(dialog.message());
      void dialog.dismiss();
    });

    await button(page, "Connect wallet").click();
    const picker = page.getByRole("region", { name: "Choose a wallet" });
    await picker.waitFor();
    expect(await picker.getByRole("button").allTextContents()).toEqual([
      "First Wallet",
      "Second Wallet",
      hostileName,
      "Cancel",
    ]);
    // Each wallet's own icon; the one that is not a data image is not shown, and names are text.
    expect(await picker.locator("img").evaluateAll((imgs) => imgs.map((i) => i.getAttribute("src")))).toEqual(
      [icons.first, icons.second],
    );
    expect(
      await picker.getByRole("button", { name: hostileName }).locator(".wallet-icon-blank").count(),
    ).toBe(1);
    expect(await focusedText(page)).toBe("First Wallet");
    expect(await page.getByRole("status").textContent()).toBe("Choose the wallet to use.");
    await shot(page, "wallet-picker");

    await button(page, "Second Wallet").click();
    // Connected and switched to the mandate's chain in the second wallet; it declines the first signature.
    await button(page, "Sign and authorize").click();
    await page.getByRole("alert").getByText("Signature declined").waitFor();
    await button(page, "Try again").click();
    await waitForDone(page);
    await waitForStatus(created.id, "active");
    expect((await mandate(created.id)).customer_address?.toLowerCase()).toBe(second.address.toLowerCase());
    expect(second.methods()).toContain("wallet_switchEthereumChain");
    // Connect, sign, sign again: each asks the chosen wallet for its account anew (the customer may
    // have switched accounts meanwhile); the declined terms, then the terms and the permit.
    expect(second.methods().filter((m) => m === "eth_requestAccounts")).toHaveLength(3);
    expect(second.methods().filter((m) => m === "eth_signTypedData_v4")).toHaveLength(3);
    expect(first.calls).toEqual([]);
    expect(hostile.calls).toEqual([]);

    // Remembered for the tab's session: another link in this tab connects the second wallet at once.
    const next = await newMandate();
    await page.goto(next.authorization_url);
    await button(page, "Connect wallet").click();
    await button(page, "Sign and authorize").waitFor();
    expect(await picker.isHidden()).toBe(true);
    expect(await page.locator("#wallet-current").textContent()).toContain("Wallet: Second Wallet");
    expect(first.calls).toEqual([]);
    await shot(page, "wallet-chosen");

    // "Use another wallet" offers them again; picking one connects it.
    await button(page, "Use another wallet").click();
    await button(page, "First Wallet").click();
    await button(page, "Sign and authorize").waitFor();
    expect(first.methods()).toEqual(["eth_requestAccounts", "eth_chainId"]);
    expect(await page.locator("#wallet-current").textContent()).toContain("Wallet: First Wallet");
    expect(dialogs).toEqual([]);
    await page.close();
    expectNoProblems();
  });

  it("uses the only announced wallet without asking, also when it announces itself a moment late", async () => {
    const created = await newMandate();
    const only = new TestWallet();
    const page = await openPage(created.authorization_url, {
      announce: [{ wallet: only, name: "Only Wallet", rdns: "com.example.only", delayMs: 400 }],
    });
    await signOnPage(page);
    await waitForStatus(created.id, "active");
    expect((await mandate(created.id)).customer_address?.toLowerCase()).toBe(only.address.toLowerCase());
    expect(await page.locator("#wallet-picker").isHidden()).toBe(true);
    expect(await page.locator("#wallet-current").isHidden()).toBe(true);
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

    // A longer countdown on the finished page, its picture, and "Keep this tab open".
    await expectKeepOpen(created.authorization_url);
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
