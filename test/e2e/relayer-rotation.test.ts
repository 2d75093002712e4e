/**
 * A relayer key rotated mid-life of a mandate, as docs/operations.md tells an operator to: the chain's
 * `operator` (a cold key that never pays gas) names relayer A with `npm run relayer -- sign` and A
 * submits it; a service with key A opens a mandate naming the operator and charges it; the operator
 * names B and removes A (signatures submitted by the relayers); a service with key B charges the next
 * period of the same mandate, which the customer signed once. The chain refuses A afterwards.
 */
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { BaseError, ContractFunctionRevertedError, type Hex, parseEther } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, describe, expect, it } from "vitest";
import { MandateEscrowAbi } from "../../abis/MandateEscrow.ts";
import { waitFor } from "../../scripts/stack/wait.ts";
import { chainDriver, usd } from "./chain-driver.ts";
import { api, merchantOnTestChain, query, stack } from "./helpers.ts";
import { startServiceProcess } from "./second-service.ts";

const CHAIN = 31337;
const MONTH = 31 * 86_400;
const dir = mkdtempSync(join(tmpdir(), "relayer-rotation-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const operatorKey = generatePrivateKey();
const operator = privateKeyToAccount(operatorKey);
const keyA = generatePrivateKey();
const keyB = generatePrivateKey();
const relayerA = privateKeyToAccount(keyA);
const relayerB = privateKeyToAccount(keyB);

/** The stack's chain 31337 with this test's operator, as the operator's config would say. */
const chainsFile = (() => {
  const config = JSON.parse(readFileSync(stack().chainsFile, "utf8")) as {
    chains: Array<{ id: number; operator?: string }>;
  };
  // Only 31337: on the stack's other chains this operator has named no relayer, so a start would refuse.
  config.chains = config.chains.filter((chain) => chain.id === CHAIN);
  for (const chain of config.chains) chain.operator = operator.address;
  const file = join(dir, "chains.json");
  writeFileSync(file, JSON.stringify(config, null, 2));
  return file;
})();

const exec = promisify(execFile);
/** `npm run relayer -- …` with the operator's key and the given relayer key. */
const relayerCli = async (relayerKey: Hex, ...args: string[]) =>
  (
    await exec(process.execPath, ["scripts/relayer.ts", ...args, "--chain", String(CHAIN)], {
      env: {
        ...process.env,
        CHAINS_CONFIG: chainsFile,
        OPERATOR_PRIVATE_KEY: operatorKey,
        RELAYER_PRIVATE_KEY: relayerKey,
      },
    })
  ).stdout.trim();

/** The operator signs (offline: it holds no gas) and the relayer holding `submitter` sends it. */
const setRelayer = async (submitter: Hex, relayer: Hex, allowed: boolean) => {
  const signed = await relayerCli(submitter, "sign", "--relayer", relayer, "--allowed", String(allowed));
  return relayerCli(submitter, "submit", signed);
};

const senderOf = async (chargeId: string) =>
  (
    await query<{ from_address: string }>(
      `SELECT r.from_address FROM billing.charges c
        JOIN billing.relayer_transactions r ON r.chain_id = c.chain_id AND r.purpose = c.relayer_purpose
        WHERE c.id = $1`,
      [chargeId],
    )
  )[0]?.from_address;

describe("rotating the relayer key", () => {
  it("keeps charging a mandate through a new key, with no new signature from the customer, and the chain refuses the old one", async () => {
    const chain = chainDriver(CHAIN);
    for (const account of [relayerA, relayerB])
      await chain.rpc("anvil_setBalance", [account.address, `0x${parseEther("10").toString(16)}`]);
    expect(await setRelayer(keyA, relayerA.address, true)).toMatch(/^named 0x[0-9a-fA-F]{40} for /);
    expect(await relayerCli(keyA, "status")).toMatch(/named {5}yes/);

    const m = await merchantOnTestChain();
    const serviceA = await startServiceProcess({ CHAINS_CONFIG: chainsFile, RELAYER_PRIVATE_KEY: keyA });
    const viaA = (path: string, body?: unknown) =>
      api(path, { key: m.key, baseUrl: serviceA.url, ...(body === undefined ? {} : { body }) });
    const created = await viaA("/v1/mandates", {
      cap_decimal: "25",
      period: "month",
      customer: "cus_rotate",
    });
    expect(created.status, created.text).toBe(200);
    const mandateId = created.json.id as string;
    const [row] = await query<{ operator_address: string }>(
      "SELECT operator_address FROM billing.mandates WHERE id = $1",
      [mandateId],
    );
    expect(row?.operator_address).toBe(operator.address);
    // Funded through the stack's service: its relayer is a minter of the local USDC, A is not.
    const funded = await m.call(`/v1/test/mandates/${mandateId}/fund`, { amount_decimal: "100" });
    expect(funded.status, funded.text).toBe(200);
    const authorized = await viaA(`/v1/test/mandates/${mandateId}/authorize`, {});
    expect(authorized.status, authorized.text).toBe(200);
    const onchainId = authorized.json.onchain_id as Hex;

    const chargeVia = async (url: string, period: number) => {
      const charged = await api(`/v1/mandates/${mandateId}/charges`, {
        key: m.key,
        baseUrl: url,
        body: { amount_decimal: "5" },
      });
      expect(charged.status, charged.text).toBe(200);
      expect(charged.json.period).toBe(period);
      const id = charged.json.id as string;
      await waitFor(async () => (await m.call(`/v1/charges/${id}`)).json.status === "succeeded", {
        timeoutMs: 30_000,
        intervalMs: 100,
        what: `charge ${id} to succeed`,
      });
      return id;
    };
    expect(await senderOf(await chargeVia(serviceA.url, 0))).toBe(relayerA.address.toLowerCase());

    // The rotation: B named (A pays the gas), A removed (B pays), A's service replaced by B's.
    expect(await setRelayer(keyA, relayerB.address, true)).toMatch(/^named /);
    expect(await setRelayer(keyB, relayerA.address, false)).toMatch(/^removed /);
    await serviceA.stop();
    const serviceB = await startServiceProcess({ CHAINS_CONFIG: chainsFile, RELAYER_PRIVATE_KEY: keyB });

    expect((await m.advance(MONTH)).status).toBe(200);
    expect(await senderOf(await chargeVia(serviceB.url, 1))).toBe(relayerB.address.toLowerCase());
    await serviceB.stop();

    // The old key can no longer act for the operator: the escrow refuses it before anything else.
    expect((await m.advance(MONTH)).status).toBe(200);
    const refused = await chain.client
      .simulateContract({
        address: chain.escrow,
        abi: MandateEscrowAbi,
        functionName: "charge",
        args: [onchainId, usd("5")],
        account: relayerA.address,
      })
      .then(
        () => undefined,
        (error: unknown) =>
          error instanceof BaseError
            ? (
                error.walk(
                  (e) => e instanceof ContractFunctionRevertedError,
                ) as ContractFunctionRevertedError | null
              )?.data?.errorName
            : String(error),
      );
    expect(refused).toBe("NotOperator");
  });
});
