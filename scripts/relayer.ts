/**
 * `npm run relayer -- <command> --chain <id>`: the operator's side of relayer keys (docs/operations.md,
 * "Rotating the relayer key"). The operator named in terms (the chain's `operator`) names the keys that
 * send for it on the escrow; rotating one changes no terms, so no customer signs again.
 *
 *   status                                   the chain's operator, its relayer and whether it is named
 *   sign --relayer 0x… --allowed true|false [--valid-for <seconds>]
 *                                            the operator's EIP-712 SetRelayer signature, as one JSON line
 *                                            (OPERATOR_PRIVATE_KEY, or --keystore <file> with
 *                                            OPERATOR_KEYSTORE_PASSWORD); the key never needs gas
 *   submit '<json from sign>'                sends it (setRelayerWithSignature), paid by the chain's relayer
 *   calldata --relayer 0x… --allowed true|false
 *                                            the setRelayer call for an operator that is a contract wallet
 *                                            (a Safe's transaction builder)
 *
 * Chains come from CHAINS_CONFIG, else the running local stack's (.data/stack.json), else
 * config/chains.json. The relayer key is the service's: RELAYER_PRIVATE_KEY or the chain's `relayer`.
 */
import { existsSync, readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { Effect, Redacted, Result, Schema } from "effect";
import { createPublicClient, createWalletClient, encodeFunctionData, type Hex, http, isAddress } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { MandateEscrowAbi } from "../abis/MandateEscrow.ts";
import { loadChainsFile } from "../service/chains/config.ts";
import { setRelayerTypedData } from "../service/chains/operator-relayers.ts";
import { keyFromSource } from "../service/chains/relayer-keys.ts";

const USAGE = `usage: npm run relayer -- <command> --chain <id>
  status
  sign --relayer <0x…> --allowed <true|false> [--valid-for <seconds>] [--keystore <file>]
  submit '<the JSON line sign printed>'
  calldata --relayer <0x…> --allowed <true|false>`;

const fail: (message: string) => never = (message) => {
  console.error(`relayer: ${message}`);
  process.exit(2);
};

const { positionals, values } = parseArgs({
  allowPositionals: true,
  options: {
    chain: { type: "string" },
    relayer: { type: "string" },
    allowed: { type: "string" },
    "valid-for": { type: "string" },
    keystore: { type: "string" },
    help: { type: "boolean" },
  },
  strict: true,
});
const [command, argument] = positionals;
if (values.help || command === undefined) fail(USAGE);
const chainId = Number(values.chain);
if (!Number.isSafeInteger(chainId) || chainId <= 0) fail(`--chain must be a chain id\n${USAGE}`);

const stackChains = () => {
  if (!existsSync(".data/stack.json")) return undefined;
  return (JSON.parse(readFileSync(".data/stack.json", "utf8")) as { chainsFile?: string }).chainsFile;
};
const configPath = process.env.CHAINS_CONFIG ?? stackChains() ?? "config/chains.json";
const loaded = await Effect.runPromise(Effect.result(loadChainsFile(configPath)));
if (Result.isFailure(loaded)) fail(loaded.failure.message);
const chain = loaded.success.chains.find((c) => c.id === chainId);
if (chain === undefined) fail(`chain ${chainId} is not in ${configPath}`);
const rpcUrl = chain.rpc?.http[0];
const escrow = chain.escrow.address as Hex | undefined;
if (rpcUrl === undefined || escrow === undefined)
  fail(
    `chain ${chainId} has no rpc or escrow address in ${configPath} (a local chain's: start the stack first)`,
  );
const client = createPublicClient({ transport: http(rpcUrl) });
const read = { address: escrow, abi: MandateEscrowAbi } as const;

const run = <A>(effect: Effect.Effect<A, string | { message: string }>) =>
  Effect.runPromise(Effect.result(effect)).then((result) =>
    Result.isSuccess(result)
      ? result.success
      : fail(typeof result.failure === "string" ? result.failure : result.failure.message),
  );

/** The service's relayer key of the chain: its `relayer` block, else RELAYER_PRIVATE_KEY. */
const relayerKey = () => run(keyFromSource(chain.relayer ?? { key_env: "RELAYER_PRIVATE_KEY" }));

const change = () => {
  const relayer = values.relayer;
  if (relayer === undefined || !isAddress(relayer))
    fail("--relayer must be an address (0x and 40 hex digits)");
  if (values.allowed !== "true" && values.allowed !== "false") fail("--allowed must be true or false");
  return { relayer: relayer as Hex, allowed: values.allowed === "true" };
};

const Signed = Schema.Struct({
  chain: Schema.Number,
  escrow: Schema.String,
  operator: Schema.String,
  relayer: Schema.String,
  allowed: Schema.Boolean,
  nonce: Schema.String,
  deadline: Schema.String,
  signature: Schema.String,
});

if (command === "status") {
  const operator = chain.operator as Hex | undefined;
  const key = await relayerKey();
  const relayer = privateKeyToAccount(Redacted.value(key)).address;
  const named =
    operator === undefined || operator.toLowerCase() === relayer.toLowerCase()
      ? "itself (no operator configured, or the operator sends)"
      : (await client.readContract({ ...read, functionName: "isRelayer", args: [operator, relayer] }))
        ? "yes"
        : "NO: the service refuses to start (sign and submit a SetRelayer)";
  const nonce =
    operator === undefined
      ? undefined
      : await client.readContract({ ...read, functionName: "relayerNonce", args: [operator] });
  const balance = await client.getBalance({ address: relayer });
  console.log(`chain     ${chainId} (${chain.name})`);
  console.log(`escrow    ${escrow}`);
  console.log(`operator  ${operator ?? `(none: the relayer ${relayer} is the operator)`}`);
  console.log(`relayer   ${relayer} (balance ${balance} wei)`);
  console.log(`named     ${named}`);
  if (nonce !== undefined) console.log(`nonce     ${nonce} (the operator's next SetRelayer signature)`);
} else if (command === "sign") {
  const { relayer, allowed } = change();
  const source = values.keystore
    ? { keystore: values.keystore, password_env: "OPERATOR_KEYSTORE_PASSWORD" }
    : { key_env: "OPERATOR_PRIVATE_KEY" };
  const operator = privateKeyToAccount(Redacted.value(await run(keyFromSource(source))));
  if (chain.operator !== undefined && chain.operator.toLowerCase() !== operator.address.toLowerCase())
    fail(`the key is ${operator.address}'s, but chain ${chainId}'s operator is ${chain.operator}`);
  const nonce = await client.readContract({
    ...read,
    functionName: "relayerNonce",
    args: [operator.address],
  });
  const validFor = Number(values["valid-for"] ?? 86_400);
  if (!Number.isSafeInteger(validFor) || validFor <= 0) fail("--valid-for must be a number of seconds");
  const block = await client.getBlock();
  const deadline = block.timestamp + BigInt(validFor);
  const message = { relayer, allowed, nonce, deadline };
  const signature = await operator.signTypedData(setRelayerTypedData(chainId, escrow, message));
  console.log(
    JSON.stringify({
      chain: chainId,
      escrow,
      operator: operator.address,
      relayer,
      allowed,
      nonce: nonce.toString(),
      deadline: deadline.toString(),
      signature,
    }),
  );
} else if (command === "submit") {
  if (argument === undefined) fail("submit takes the JSON line `sign` printed");
  const parsed = Schema.decodeUnknownResult(Schema.fromJsonString(Signed))(argument);
  if (Result.isFailure(parsed))
    fail(`not a signature from \`sign\`: ${parsed.failure.message.split("\n")[0]}`);
  const signed = parsed.success;
  if (signed.chain !== chainId || signed.escrow.toLowerCase() !== escrow.toLowerCase())
    fail(`signed for chain ${signed.chain} at ${signed.escrow}, not chain ${chainId} at ${escrow}`);
  const operator = signed.operator as Hex;
  const relayer = signed.relayer as Hex;
  const now = await client.readContract({ ...read, functionName: "isRelayer", args: [operator, relayer] });
  if (now === signed.allowed) {
    console.log(`nothing sent: ${relayer} is already ${signed.allowed ? "named" : "removed"} by ${operator}`);
    process.exit(0);
  }
  const sender = privateKeyToAccount(Redacted.value(await relayerKey()));
  const args = [
    operator,
    relayer,
    signed.allowed,
    BigInt(signed.nonce),
    BigInt(signed.deadline),
    signed.signature as Hex,
  ] as const;
  const { request } = await client
    .simulateContract({ ...read, account: sender, functionName: "setRelayerWithSignature", args })
    .catch((error: unknown) =>
      fail(`the escrow refuses it: ${(error as { shortMessage?: string }).shortMessage ?? error}`),
    );
  const hash = await createWalletClient({ account: sender, transport: http(rpcUrl) }).writeContract({
    ...request,
    chain: null,
  });
  const receipt = await client.waitForTransactionReceipt({ hash });
  if (receipt.status !== "success") fail(`${hash} reverted`);
  console.log(
    `${signed.allowed ? "named" : "removed"} ${relayer} for ${operator}: ${hash} (block ${receipt.blockNumber})`,
  );
} else if (command === "calldata") {
  const { relayer, allowed } = change();
  console.log(`to    ${escrow}`);
  console.log(
    `data  ${encodeFunctionData({ abi: MandateEscrowAbi, functionName: "setRelayer", args: [relayer, allowed] })}`,
  );
} else fail(USAGE);
