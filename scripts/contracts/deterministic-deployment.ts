/**
 * Deploys our contracts at the same address on every chain: through the canonical deterministic-deployment
 * proxy (Arachnid's, at 0x4e59b448…956c on most chains; anvil has it preinstalled), which CREATE2s the
 * code it is sent under a salt, so an address depends only on the code and the salt. Where the proxy is
 * missing it is deployed first by its published pre-signed transaction (no chain id in it, so it is valid
 * on every chain; its one-time signer needs 0.01 of the native coin for its gas). Used by `npm run deploy`
 * and by the local stack, so every `npm test` goes this way.
 */
import {
  type Account,
  type Chain,
  concat,
  getContractAddress,
  type Hex,
  keccak256,
  type PublicClient,
  stringToHex,
  type Transport,
  type WalletClient,
} from "viem";
import { MandateEscrowBytecode } from "../../abis/MandateEscrow.ts";

export const CREATE2_PROXY = "0x4e59b44847b379578588920ca78fbf26c0b4956c" as const;
/** The proxy's one-time signer: its nonce 0 is the proxy's deployment. */
export const CREATE2_PROXY_SIGNER = "0x3fab184622dc19b6109349b94811493bf2a45362" as const;
/**
 * The proxy's deployment as published (github.com/Arachnid/deterministic-deployment-proxy): legacy,
 * without chain id (v = 27), gas price 100 gwei, gas limit 100,000, signed by a key nobody holds (r = s =
 * 0x2222…). test/unit/deterministic-deployment.test.ts recovers its signer and address from these bytes.
 */
export const CREATE2_PROXY_TRANSACTION: Hex =
  "0xf8a58085174876e800830186a08080b853604580600e600039806000f350fe7fffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffe03601600081602082378035828234f58015156039578182fd5b8082525050506014600cf31ba02222222222222222222222222222222222222222222222222222222222222222a02222222222222222222222222222222222222222222222222222222222222222";
/** Gas price × gas limit of that transaction: what its signer must hold. */
export const CREATE2_PROXY_COST = 100_000_000_000n * 100_000n;

/** One salt for all our contracts: the address changes only with the code (and its constructor's arguments). */
export const DEPLOYMENT_SALT: Hex = keccak256(stringToHex("mandate-billing"));

export interface DeterministicContract {
  readonly name: string;
  /** Creation code, constructor arguments appended. */
  readonly initCode: Hex;
  /** Contracts its constructor creates (by CREATE, at these nonces of the new contract). */
  readonly creates?: ReadonlyArray<{ readonly name: string; readonly nonce: bigint }>;
}

/** The escrow; its constructor creates the collector, at its nonce 1. */
export const ESCROW_CONTRACT: DeterministicContract = {
  name: "MandateEscrow",
  initCode: MandateEscrowBytecode,
  creates: [{ name: "DepositCollector", nonce: 1n }],
};

/** What `npm run deploy` puts on a chain, in order. */
export const BILLING_CONTRACTS: readonly DeterministicContract[] = [ESCROW_CONTRACT];

export const deterministicAddress = (contract: DeterministicContract, salt: Hex = DEPLOYMENT_SALT): Hex =>
  getContractAddress({ opcode: "CREATE2", from: CREATE2_PROXY, salt, bytecode: contract.initCode });

export interface Deployed {
  readonly name: string;
  readonly address: Hex;
  /** False: it was already there, and nothing was sent. */
  readonly deployed: boolean;
  /** The block of this run's deployment (undefined when it was already there). */
  readonly block?: bigint;
  readonly transaction?: Hex;
  readonly created: ReadonlyArray<{ readonly name: string; readonly address: Hex }>;
}

type Writer = WalletClient<Transport, Chain | undefined, Account>;

const hasCode = async (client: PublicClient, address: Hex, blockNumber?: bigint) => {
  const code = await client.getCode(blockNumber === undefined ? { address } : { address, blockNumber });
  return code !== undefined && code !== "0x";
};

const mined = async (client: PublicClient, hash: Hex, what: string) => {
  const receipt = await client.waitForTransactionReceipt({ hash });
  if (receipt.status !== "success") throw new Error(`${what} reverted (transaction ${hash})`);
  return receipt;
};

/**
 * Makes sure the proxy is on the chain: deployed by its published transaction when missing (the writer
 * tops its signer up to the transaction's cost first). True when this call deployed it.
 */
export const ensureCreate2Proxy = async (client: PublicClient, writer: Writer): Promise<boolean> => {
  if (await hasCode(client, CREATE2_PROXY)) return false;
  const used = await client.getTransactionCount({ address: CREATE2_PROXY_SIGNER });
  if (used > 0)
    throw new Error(
      `the deterministic-deployment proxy ${CREATE2_PROXY} is missing, and its one-time signer ${CREATE2_PROXY_SIGNER} has already sent ${used} transaction(s) on this chain, so it can never be deployed at that address here`,
    );
  const balance = await client.getBalance({ address: CREATE2_PROXY_SIGNER });
  if (balance < CREATE2_PROXY_COST)
    await mined(
      client,
      await writer.sendTransaction({
        to: CREATE2_PROXY_SIGNER,
        value: CREATE2_PROXY_COST - balance,
        chain: writer.chain,
      }),
      "funding the proxy's signer",
    );
  const hash = await client.request({
    method: "eth_sendRawTransaction",
    params: [CREATE2_PROXY_TRANSACTION],
  });
  await mined(client, hash, "the proxy's published deployment");
  if (!(await hasCode(client, CREATE2_PROXY)))
    throw new Error(`the proxy's deployment ${hash} left no code at ${CREATE2_PROXY}`);
  return true;
};

/**
 * Deploys each contract the chain does not have yet, in order, through the proxy; one already at its
 * address is left alone (so a second run sends nothing). The proxy must be there (`ensureCreate2Proxy`).
 */
export const deployDeterministic = async (
  client: PublicClient,
  writer: Writer,
  contracts: readonly DeterministicContract[] = BILLING_CONTRACTS,
  salt: Hex = DEPLOYMENT_SALT,
): Promise<Deployed[]> => {
  const results: Deployed[] = [];
  for (const contract of contracts) {
    const address = deterministicAddress(contract, salt);
    const created = (contract.creates ?? []).map(({ name, nonce }) => ({
      name,
      address: getContractAddress({ from: address, nonce }),
    }));
    if (await hasCode(client, address)) {
      results.push({ name: contract.name, address, deployed: false, created });
      continue;
    }
    const transaction = await writer.sendTransaction({
      to: CREATE2_PROXY,
      data: concat([salt, contract.initCode]),
      chain: writer.chain,
    });
    const receipt = await mined(client, transaction, `deploying ${contract.name}`);
    if (!(await hasCode(client, address)))
      throw new Error(`deploying ${contract.name} (${transaction}) left no code at ${address}`);
    results.push({
      name: contract.name,
      address,
      deployed: true,
      block: receipt.blockNumber,
      transaction,
      created,
    });
  }
  return results;
};

/**
 * The block a contract was deployed in, by bisecting `eth_getCode` at past blocks: for a contract found
 * already deployed. Needs a node that keeps past state (an archive node; anvil does); undefined otherwise.
 */
export const deploymentBlock = async (client: PublicClient, address: Hex): Promise<bigint | undefined> => {
  let high = await client.getBlockNumber();
  if (!(await hasCode(client, address, high))) return undefined;
  let low = 0n;
  try {
    while (low < high) {
      const middle = (low + high) / 2n;
      if (await hasCode(client, address, middle)) high = middle;
      else low = middle + 1n;
    }
  } catch {
    return undefined;
  }
  return high;
};
