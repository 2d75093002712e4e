import { readFileSync } from "node:fs";
import { getContractAddress, parseTransaction, recoverTransactionAddress } from "viem";
import { generatePrivateKey } from "viem/accounts";
import { describe, expect, it } from "vitest";
import {
  CREATE2_PROXY,
  CREATE2_PROXY_COST,
  CREATE2_PROXY_SIGNER,
  CREATE2_PROXY_TRANSACTION,
  deterministicAddress,
  ESCROW_CONTRACT,
} from "../../scripts/contracts/deterministic-deployment.ts";
import { publiclyKnownKey } from "../../service/chains/public-keys.ts";

describe("the deterministic-deployment proxy's published transaction", () => {
  it("is signed by the proxy's one-time signer, without chain id, and creates the proxy at its nonce 0", async () => {
    const transaction = parseTransaction(CREATE2_PROXY_TRANSACTION);
    expect(transaction.type).toBe("legacy");
    expect(transaction.chainId).toBeUndefined();
    expect(transaction.nonce ?? 0).toBe(0);
    expect((transaction.gasPrice ?? 0n) * (transaction.gas ?? 0n)).toBe(CREATE2_PROXY_COST);
    const signer = await recoverTransactionAddress({
      serializedTransaction: CREATE2_PROXY_TRANSACTION as `0x${string}` & { __legacy: true },
    } as Parameters<typeof recoverTransactionAddress>[0]);
    expect(signer.toLowerCase()).toBe(CREATE2_PROXY_SIGNER);
    expect(getContractAddress({ from: signer, nonce: 0n }).toLowerCase()).toBe(CREATE2_PROXY);
  });
});

describe("publicly known keys", () => {
  it("names anvil's and Hardhat's default accounts, Ganache's and the smallest keys; not a fresh key", () => {
    expect(publiclyKnownKey("0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80")).toBe(
      "account 0 of anvil's and Hardhat's default mnemonic",
    );
    expect(publiclyKnownKey("0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a")).toBe(
      "account 2 of anvil's and Hardhat's default mnemonic",
    );
    // Hardhat's 20th account (index 19).
    expect(publiclyKnownKey("0xdf57089febbacf7ba0bc227dafbffa9fc08a93fdc68e1e42411a14efcf23656e")).toBe(
      "account 19 of anvil's and Hardhat's default mnemonic",
    );
    // Ganache's first deterministic account.
    expect(publiclyKnownKey("0x4f3edf983ac636a65a842ce7c78d9aa706d3b113bce9c46f30d7d21715b23b1d")).toBe(
      "account 0 of Ganache's default mnemonic",
    );
    expect(publiclyKnownKey(`0x${"0".repeat(63)}1`)).toBe("the private key 1");
    expect(publiclyKnownKey(generatePrivateKey())).toBeUndefined();
  });
});

describe("the addresses docs/operations.md shows", () => {
  it("are this build's: the escrow's CREATE2 address and its collector's", () => {
    const escrow = deterministicAddress(ESCROW_CONTRACT);
    const collector = getContractAddress({ from: escrow, nonce: 1n });
    const docs = readFileSync("docs/operations.md", "utf8");
    expect(docs).toContain(`MandateEscrow ${escrow}: deployed`);
    expect(docs).toContain(`DepositCollector ${collector}: created`);
  });
});
