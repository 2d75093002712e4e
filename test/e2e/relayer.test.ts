/**
 * The relayer on a real chain and the real database: one transaction per purpose, consecutive nonces
 * under concurrency, no gas spent on a transaction that would revert, lost broadcasts healed, and stuck
 * transactions replaced with higher fees.
 */
import { Effect } from "effect";
import { encodeFunctionData, type Hex } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MandateEscrowAbi } from "../../abis/MandateEscrow.ts";
import { TestUSDCAbi } from "../../abis/TestUSDC.ts";
import { type RunningAnvil, rpc, startAnvil } from "../../scripts/stack/anvil.ts";
import { freePort } from "../../scripts/stack/wait.ts";
import type { ResolvedChain } from "../../service/chains/config.ts";
import { Relayer, type RelayerError } from "../../service/chains/relayer.ts";
import { deployTestUsdc } from "./chain-driver.ts";
import { type RelayerServices, relayerRunner, relayerTestChain, track } from "./relayer-harness.ts";

const CHAIN_ID = 31341;
let anvil: RunningAnvil;
let chain: ResolvedChain;
let token: Hex;
let run: <A, E>(effect: Effect.Effect<A, E, RelayerServices>) => Promise<A>;
let dispose: (() => Promise<void>) | undefined;

beforeAll(async () => {
  anvil = await startAnvil({ port: await freePort(), chainId: CHAIN_ID });
  // The token to call.
  token = await deployTestUsdc(anvil);
  chain = relayerTestChain(CHAIN_ID, "relayer test chain", anvil.http, token);
  const runner = relayerRunner(chain);
  dispose = runner.dispose;
  run = runner.run;
});
afterAll(async () => {
  await dispose?.();
  await anvil?.stop();
});

const mint = (amount: bigint) =>
  encodeFunctionData({
    abi: TestUSDCAbi,
    functionName: "mint",
    args: ["0x000000000000000000000000000000000000dEaD", amount],
  });
const submit = (purpose: string, data: Hex = mint(1n), to: Hex = token) =>
  Effect.flatMap(Effect.service(Relayer), (relayer) => relayer.submit(CHAIN_ID, { to, data, purpose }));
/** A tracking pass that replaces a transaction unmined for a second. */
const quickTrack = track("1 second");
/** A tracking pass whose bump delay every transaction has passed: each one not mined is replaced. */
const eagerTrack = track("0 millis");
/** A tracking pass with a long bump delay: a young transaction is only re-broadcast. */
const patientTrack = track("1 hour");
const find = (purpose: string) =>
  Effect.flatMap(Effect.service(Relayer), (relayer) => relayer.find(CHAIN_ID, purpose));

describe("relayer", () => {
  it("gives concurrent submissions consecutive nonces and each purpose one transaction", async () => {
    const purposes = Array.from({ length: 12 }, (_, i) => `test:concurrent:${i}`);
    const submitted = await run(
      Effect.all(
        [...purposes, ...purposes].map((purpose) => submit(purpose)),
        { concurrency: "unbounded" },
      ),
    );
    const byPurpose = new Map(submitted.map((tx) => [tx.purpose, tx]));
    expect(byPurpose.size).toBe(12);
    for (const tx of submitted) expect(tx.hash).toBe(byPurpose.get(tx.purpose)?.hash);
    const nonces = [...byPurpose.values()].map((tx) => tx.nonce).sort((a, b) => a - b);
    const first = nonces[0] ?? 0;
    expect(nonces).toEqual(nonces.map((_, i) => first + i));
    await run(quickTrack);
    for (const purpose of purposes) expect((await run(find(purpose)))?.status).toBe("mined");
  });

  it("spends no gas on a transaction that would revert", async () => {
    const charge = encodeFunctionData({
      abi: MandateEscrowAbi,
      functionName: "charge",
      args: [`0x${"11".repeat(32)}`, 1n],
    });
    const error = await run(Effect.flip(submit("test:revert", charge, token)));
    expect((error as RelayerError).reason).toBe("simulation_failed");
    expect(await run(find("test:revert"))).toBeUndefined();
  });

  it("re-broadcasts a transaction whose broadcast was lost", async () => {
    await rpc(anvil.http, "evm_setAutomine", [false]);
    try {
      const tx = await run(submit("test:lost"));
      await rpc(anvil.http, "anvil_dropTransaction", [tx.hash]);
      await rpc(anvil.http, "evm_mine");
      expect(await rpc(anvil.http, "eth_getTransactionReceipt", [tx.hash])).toBeNull();
      await run(patientTrack); // not due for a replacement: the same bytes again
      await rpc(anvil.http, "evm_mine");
      await run(patientTrack);
      const after = await run(find("test:lost"));
      expect(after?.status).toBe("mined");
      expect(after?.hashes).toEqual([tx.hash]);
    } finally {
      await rpc(anvil.http, "evm_setAutomine", [true]);
    }
  });

  it("replaces a stuck transaction with higher fees, same nonce", async () => {
    await rpc(anvil.http, "evm_setAutomine", [false]);
    try {
      const tx = await run(submit("test:stuck"));
      await rpc(anvil.http, "anvil_dropTransaction", [tx.hash]); // never to be mined as first sent
      await run(eagerTrack);
      const replaced = await run(find("test:stuck"));
      expect(replaced?.hashes).toHaveLength(2);
      expect(replaced?.nonce).toBe(tx.nonce);
      await rpc(anvil.http, "evm_mine");
      await run(quickTrack);
      const mined = await run(find("test:stuck"));
      expect(mined?.status).toBe("mined");
      const receipt = (await rpc(anvil.http, "eth_getTransactionReceipt", [mined?.hashes[1]])) as {
        status: string;
      } | null;
      expect(receipt?.status).toBe("0x1");
    } finally {
      await rpc(anvil.http, "evm_setAutomine", [true]);
    }
  });
});
