/**
 * The hosted pay page in headless Chromium against the real stack, with the injected test wallet of
 * browser-wallet.ts: what the payer sees (amount, token, network, address, a QR code decoded back to
 * its EIP-681 link, the copy button), live status through a partial and a full plain transfer, the
 * gasless payment from a wallet that holds tokens and no gas, `close=1` and `delay`, expiry, and the
 * JSON API's refusals of bad authorizations (each a 4xx that sends nothing).
 * Screenshots of each state go to test-results/pay-page/ (a test artifact, gitignored).
 */

import { randomUUID } from "node:crypto";
import jsqrModule from "jsqr";
import type { Page } from "playwright-core";
import QRCode from "qrcode";
import {
  createPublicClient,
  createWalletClient,
  defineChain,
  type Hex,
  http,
  parseAbi,
  parseSignature,
} from "viem";
import { generatePrivateKey, type PrivateKeyAccount, privateKeyToAccount } from "viem/accounts";
import { beforeAll, describe, expect, it } from "vitest";
import { QR_OPTIONS } from "../../service/http/pay-page/client/qr.ts";
import { announceLater, CHAIN_ID, chainRpcUrl, hostedPageBrowser, TestWallet } from "./browser-wallet.ts";
import { faucet } from "./chain-driver.ts";
import { paySession, postAuthorization, signTransferAuthorization } from "./gasless-authorizations.ts";
import { expectErrorShape, merchantOnTestChain, query, stack } from "./helpers.ts";

const { openPage, shot, button, expectKeepOpen, expectNoProblems } =
  hostedPageBrowser("test-results/pay-page");

/** jsqr is CommonJS with an `exports.default`: interop hands over the function or the module object. */
const jsQR = ((jsqrModule as { default?: unknown }).default ?? jsqrModule) as (
  data: Uint8ClampedArray,
  width: number,
  height: number,
) => { data: string } | null;

interface Payment {
  readonly id: string;
  readonly status: string;
  readonly payment_url: string;
  readonly address: string;
  readonly token_address: Hex;
}

let merchant: Awaited<ReturnType<typeof merchantOnTestChain>>;

const newPayment = async (body: Record<string, unknown> = {}): Promise<Payment> => {
  const created = await merchant.call("/v1/payments", { amount_decimal: "10", ...body });
  expect(created.status, created.text).toBe(200);
  expect(created.json.payment_url).toMatch(/\/pay\/[A-Za-z0-9_-]{20,80}$/);
  return created.json as Payment;
};

const payment = async (id: string): Promise<Payment> => (await merchant.call(`/v1/payments/${id}`)).json;

/** A plain ERC-20 transfer to the deposit address from a test payer (the test helper mints and sends). */
const transfer = async (id: string, amount: string) => {
  const sent = await merchant.call(`/v1/test/payments/${id}/pay`, { amount_decimal: amount });
  expect(sent.status, sent.text).toBe(200);
};

const waitForPaid = async (id: string) => {
  await merchant.waitForEvents("payment.paid", 1, (object) => object.id === id);
  expect((await payment(id)).status).toBe("paid");
};

const heading = (page: Page, name: string | RegExp) => page.getByRole("heading", { name, level: 1 });

/** The QR code on the page, drawn on a canvas and decoded (jsQR: another library than the encoder). */
const decodeQr = async (page: Page): Promise<string | undefined> => {
  await page.locator("#qr svg").waitFor();
  const image = await page.evaluate(async () => {
    const svg = document.querySelector("#qr svg") as SVGSVGElement;
    const img = new Image();
    img.src = `data:image/svg+xml;base64,${btoa(new XMLSerializer().serializeToString(svg))}`;
    await img.decode();
    const size = 330;
    const canvas = document.createElement("canvas");
    canvas.width = size;
    canvas.height = size;
    const context = canvas.getContext("2d") as CanvasRenderingContext2D;
    context.fillStyle = "#fff";
    context.fillRect(0, 0, size, size);
    context.drawImage(img, 0, 0, size, size);
    return { size, pixels: Array.from(context.getImageData(0, 0, size, size).data) };
  });
  return jsQR(Uint8ClampedArray.from(image.pixels), image.size, image.size)?.data;
};

// ---------------------------------------------------------------------------------------------------
// The chain: test tokens for a wallet that holds no gas

const localChain = () => {
  const chain = defineChain({
    id: CHAIN_ID,
    name: "test",
    nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
    rpcUrls: { default: { http: [chainRpcUrl()] } },
  });
  return {
    publicClient: createPublicClient({ chain, transport: http() }),
    walletClient: (account: PrivateKeyAccount) => createWalletClient({ chain, transport: http(), account }),
  };
};
let local: ReturnType<typeof localChain>;

beforeAll(async () => {
  merchant = await merchantOnTestChain();
  local = localChain();
});

const tokenAbi = parseAbi([
  "function mint(address to, uint256 amount)",
  "function transferWithAuthorization(address from, address to, uint256 value, uint256 validAfter, uint256 validBefore, bytes32 nonce, uint8 v, bytes32 r, bytes32 s)",
]);

/** A throwaway account with gas, for what the test itself sends. */
const gasAccount = async (): Promise<PrivateKeyAccount> => {
  const account = privateKeyToAccount(generatePrivateKey());
  await local.publicClient.request({
    method: "anvil_setBalance",
    params: [account.address, "0xde0b6b3a7640000"],
  } as never);
  return account;
};

/** Mints from the local USDC's test faucet, a minter. */
const mint = async (token: Hex, to: Hex, units: bigint) => {
  const wallet = local.walletClient(faucet);
  const hash = await wallet.writeContract({
    address: token,
    abi: tokenAbi,
    functionName: "mint",
    args: [to, units],
  });
  expect((await local.publicClient.waitForTransactionReceipt({ hash })).status).toBe("success");
};

/** The relayer transactions sent for a payment's gasless transfers. */
const gaslessTransactions = async (id: string) =>
  (
    await query<{ count: number }>(
      "SELECT count(*)::int AS count FROM billing.relayer_transactions WHERE action = $1",
      [`pay-gasless:${CHAIN_ID}:${id}`],
    )
  )[0]?.count ?? -1;

// ---------------------------------------------------------------------------------------------------

describe("hosted pay page", () => {
  it("shows amount, token, network, address and a QR code of the EIP-681 link; copies the address; follows a partial then a full transfer to paid", async () => {
    const created = await newPayment({ amount_decimal: "10", description: "Order 42" });
    const page = await openPage(created.payment_url, null, { clipboard: true });
    await heading(page, /^Pay /).waitFor();
    const card = page.locator(".card");
    const text = await card.textContent();
    expect(text).toContain("10 USDC");
    expect(text).toContain("Order 42");
    expect(text).toContain("Local test chain");
    expect(text).toContain("Test mode");
    expect(await page.locator("#address").textContent()).toBe(created.address);
    // An hour to pay: the full hour when the page opens in the block the payment was created in.
    await expect.poll(() => page.locator("#expiry").textContent()).toMatch(/^Expires in (1:00:00|59:\d\d)$/);

    // The QR code carries the EIP-681 transfer of the whole amount, as the library draws it.
    const first = await paySession(created.payment_url);
    const uri = `ethereum:${first.token.address}@${CHAIN_ID}/transfer?address=${created.address}&uint256=10000000`;
    expect(first.payment_uri).toBe(uri);
    expect(await decodeQr(page)).toBe(uri);
    const drawn = await page
      .locator("#qr svg path")
      .evaluateAll((paths) => paths.map((p) => p.getAttribute("d")));
    const library = [...(await QRCode.toString(uri, QR_OPTIONS)).matchAll(/ d="([^"]+)"/g)].map((m) => m[1]);
    expect(drawn).toEqual(library);
    await shot(page, "waiting");

    // Without a browser wallet the button says so (the address and the QR code still work).
    await button(page, "Pay 10 USDC with your wallet").click();
    await page.getByRole("alert").getByText("No wallet found").waitFor();
    await shot(page, "no-wallet");

    await button(page, "Copy address").click();
    await button(page, "Copied").waitFor();
    expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(created.address);

    // 3 of 10 arrive: partly received, 7 left, and the QR code now asks for 7.
    await transfer(created.id, "3");
    await heading(page, "Partly received").waitFor({ timeout: 30_000 });
    expect(await page.locator("#amount").textContent()).toBe("7 USDC");
    expect(await page.getByRole("status").textContent()).toBe("Partly received: 7 USDC left to pay.");
    await expect
      .poll(() => decodeQr(page), { timeout: 10_000 })
      .toBe(uri.replace("uint256=10000000", "uint256=7000000"));
    await shot(page, "partly-received");

    // The rest: confirming, then paid.
    await transfer(created.id, "7");
    await heading(page, "Payment received").waitFor({ timeout: 60_000 });
    expect(await card.textContent()).toContain("received 10 USDC. Thank you!");
    expect(await page.locator(".deposit").isHidden()).toBe(true);
    await shot(page, "paid");
    await waitForPaid(created.id);
    await page.close();
    expectNoProblems();
  });

  it("pays without gas: the wallet signs an EIP-3009 authorization, the relayer sends it, payment.paid follows", async () => {
    const created = await newPayment({ amount_decimal: "5" });
    const wallet = new TestWallet();
    await mint(created.token_address, wallet.address, 5_000_000n);
    expect(await local.publicClient.getBalance({ address: wallet.address })).toBe(0n);

    const page = await openPage(created.payment_url, wallet);
    await button(page, "Pay 5 USDC with your wallet").waitFor();
    expect(await page.locator("#hint").textContent()).toContain("No gas needed");
    wallet.onSign = async () => {
      await page
        .getByRole("status")
        .filter({ hasText: "Sign the payment of 5 USDC in your wallet." })
        .waitFor();
      await shot(page, "signing");
    };
    await button(page, "Pay 5 USDC with your wallet").click();
    await heading(page, "Payment received").waitFor({ timeout: 60_000 });
    await shot(page, "paid-gasless");

    const signed = wallet.calls.filter((c) => c.method === "eth_signTypedData_v4");
    expect(signed).toHaveLength(1);
    const typed = JSON.parse(String(signed[0]?.params[1])) as {
      primaryType: string;
      message: Record<string, string>;
    };
    expect(typed.primaryType).toBe("TransferWithAuthorization");
    expect(typed.message).toMatchObject({ to: created.address, value: "5000000", validAfter: "0" });
    expect(wallet.methods()).not.toContain("eth_sendTransaction");
    expect(await local.publicClient.getBalance({ address: wallet.address })).toBe(0n);
    expect(await gaslessTransactions(created.id)).toBe(1);

    await waitForPaid(created.id);
    const paid = await paySession(created.payment_url);
    expect(paid.gasless_transaction?.status).toBe("mined");
    expect(paid.transfers).toBe(1);
    await page.close();

    // `close=1&delay=1`: a paid page opened by a script closes itself after a one-second countdown.
    const closing = await openPage(`${created.payment_url}?close=1&delay=1`, null, { popup: true });
    const closed = new Promise<void>((resolve) => closing.once("close", () => resolve()));
    await closed;

    // A longer countdown on the finished page, its picture, and "Keep this tab open".
    await expectKeepOpen(created.payment_url);
    expectNoProblems();
  });

  it("pays with the second of several EIP-6963 wallets, which the payer picks; the others are asked nothing", async () => {
    const created = await newPayment({ amount_decimal: "3" });
    const first = new TestWallet();
    const second = new TestWallet();
    const late = new TestWallet();
    await mint(created.token_address, second.address, 3_000_000n);
    const firstUuid = randomUUID();
    const page = await openPage(created.payment_url, {
      announce: [
        { wallet: first, name: "First Wallet", rdns: "com.example.first", uuid: firstUuid },
        { wallet: second, name: "Second Wallet", rdns: "com.example.second" },
        // Another announcement under the first one's uuid: ignored.
        { wallet: late, name: "Impostor", rdns: "com.example.impostor", uuid: firstUuid },
        { wallet: late, name: "Late Wallet", rdns: "com.example.late", later: true },
      ],
      // Also window.ethereum, which the page leaves alone once wallets announce themselves.
      ethereum: first,
    });
    await button(page, "Pay 3 USDC with your wallet").click();
    const picker = page.getByRole("region", { name: "Choose a wallet" });
    await picker.waitFor();
    expect(await picker.locator(".wallet-option").allTextContents()).toEqual([
      "First Wallet",
      "Second Wallet",
    ]);
    expect(await page.locator("#action").isHidden()).toBe(true);
    expect(await page.locator("#secondary").isHidden()).toBe(true);

    // A wallet that announces itself while the picker is open joins it.
    await announceLater(page);
    await picker.getByRole("button", { name: "Late Wallet" }).waitFor();
    expect(await picker.locator(".wallet-option").allTextContents()).toEqual([
      "First Wallet",
      "Second Wallet",
      "Late Wallet",
    ]);
    await shot(page, "wallet-picker");

    await button(page, "Second Wallet").click();
    await heading(page, "Payment received").waitFor({ timeout: 60_000 });
    const signed = second.calls.filter((c) => c.method === "eth_signTypedData_v4");
    expect(signed).toHaveLength(1);
    const typed = JSON.parse(String(signed[0]?.params[1])) as { message: Record<string, string> };
    expect(typed.message).toMatchObject({ from: second.address, to: created.address, value: "3000000" });
    expect(first.calls).toEqual([]);
    expect(late.calls).toEqual([]);
    await waitForPaid(created.id);
    await page.close();
    expectNoProblems();
  });

  it("refuses bad authorizations with a clear 4xx and sends nothing", async () => {
    const created = await newPayment({ amount_decimal: "4" });
    const url = created.payment_url;
    const current = await paySession(url);
    const payer = privateKeyToAccount(generatePrivateKey());
    const other = privateKeyToAccount(generatePrivateKey());
    await mint(created.token_address, payer.address, 4_000_000n);
    const refused = async (body: unknown, status: number, code: string, param: string | null) => {
      const answer = await postAuthorization(url, body);
      expect(answer.status, JSON.stringify(answer.json)).toBe(status);
      const error = expectErrorShape(answer.json);
      expect({ code: error.code, param: error.param }).toEqual({ code, param });
      return error;
    };

    // Unknown and malformed links: the JSON 404 of the page, and a readable HTML 404.
    const unknown = `${stack().apiUrl}/pay/${"x".repeat(32)}`;
    for (const path of [
      `${unknown}/session`,
      `${stack().apiUrl}/pay/short/session`,
      `${stack().apiUrl}/pay/${"x".repeat(30)}%00/session`,
    ]) {
      const missing = await fetch(path);
      expect(missing.status).toBe(404);
      expect(expectErrorShape(await missing.json()).code).toBe("payment_page_not_found");
    }
    const wrongLink = await postAuthorization(unknown, await signTransferAuthorization(payer, current));
    expect([wrongLink.status, wrongLink.json.error.code]).toEqual([404, "payment_page_not_found"]);
    const html = await fetch(unknown);
    expect(html.status).toBe(404);
    expect(html.headers.get("content-type")).toMatch(/^text\/html/);
    expect(await html.text()).toContain("Payment not found");

    // The request's shape, then each check in turn.
    const good = await signTransferAuthorization(payer, current);
    await refused({ ...good, tip: "1" }, 400, "parameter_unknown", "tip");
    await refused({ ...good, value: "1e6" }, 400, "parameter_invalid", "value");
    await refused({ ...good, signature: "0x1234" }, 400, "parameter_invalid", "signature");
    await refused(
      await signTransferAuthorization(payer, current, { to: other.address }),
      400,
      "payment_recipient_mismatch",
      "to",
    );
    await refused(
      await signTransferAuthorization(payer, current, { value: "3999999" }),
      400,
      "payment_amount_too_low",
      "value",
    );
    await refused(
      await signTransferAuthorization(payer, current, { validBefore: String(current.now + 30) }),
      400,
      "authorization_expired",
      "valid_before",
    );
    await refused(
      await signTransferAuthorization(payer, current, { validAfter: String(current.now + 600) }),
      400,
      "authorization_not_yet_valid",
      "valid_after",
    );
    // Signed by another key for the payer's address, or changed after signing.
    await refused(
      { ...(await signTransferAuthorization(other, current)), from: payer.address },
      400,
      "signature_invalid",
      "signature",
    );
    await refused({ ...good, value: "4000001" }, 400, "signature_invalid", "signature");
    // A signer without the tokens.
    await refused(await signTransferAuthorization(other, current), 400, "payer_balance_insufficient", "from");
    // A nonce the payer already used elsewhere (submitted straight to the token by someone with gas).
    const nonce = generatePrivateKey();
    const elsewhere = await signTransferAuthorization(payer, current, {
      to: other.address,
      value: "1",
      nonce,
    });
    const submitter = local.walletClient(await gasAccount());
    const { r, s, v } = parseSignature(elsewhere.signature);
    const hash = await submitter.writeContract({
      address: created.token_address,
      abi: tokenAbi,
      functionName: "transferWithAuthorization",
      args: [payer.address, other.address, 1n, 0n, BigInt(elsewhere.valid_before), nonce, Number(v), r, s],
    });
    expect((await local.publicClient.waitForTransactionReceipt({ hash })).status).toBe("success");
    await refused(
      await signTransferAuthorization(payer, current, { nonce }),
      400,
      "authorization_used",
      "nonce",
    );
    expect(await gaslessTransactions(created.id)).toBe(0);

    // Paid by a plain transfer: nothing is left to pay.
    await transfer(created.id, "4");
    await waitForPaid(created.id);
    await refused(await signTransferAuthorization(payer, current), 400, "payment_not_payable", null);
    expect(await gaslessTransactions(created.id)).toBe(0);
  });

  it("counts down to the expiry in chain time, then shows the payment expired", async () => {
    const created = await newPayment({ amount_decimal: "2", expires_in: 60 });
    const page = await openPage(created.payment_url, null);
    await expect.poll(() => page.locator("#expiry").textContent()).toMatch(/^Expires in [01]:\d\d$/);
    const advanced = await merchant.advance(120);
    expect(advanced.status, advanced.text).toBe(200);
    await heading(page, "Payment expired").waitFor({ timeout: 30_000 });
    expect(await page.locator(".deposit").isHidden()).toBe(true);
    expect(await page.locator("#action").isHidden()).toBe(true);
    expect(await page.locator(".card").textContent()).toContain("Don't send anything to its address");
    await shot(page, "expired");
    expect((await payment(created.id)).status).toBe("expired");
    await page.close();
    expectNoProblems();
  });
});
