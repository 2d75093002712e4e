/**
 * A wallet's signatures of hashes, judged as the chain's contracts will judge them, including ERC-6492's
 * wrapper from a smart wallet that is not deployed yet. Shared by the authorization page (terms and
 * permit) and the pay page (EIP-3009 transfers); it knows nothing of either, so an x402 facilitator can
 * use it as it is.
 *
 * Routed by the signer's code, as the escrow's (OpenZeppelin's) and USDC's (Circle's) `SignatureChecker`
 * route it: an address without code signs by ECDSA (recovered here), an address with code by ERC-1271
 * (`isValidSignature`, asked of the chain, with no ECDSA fallback). A signature ending in ERC-6492's
 * magic suffix is `abi.encode(factory, factoryCalldata, innerSignature) ++ 0x6492…6492`:
 * - the signer has code: the wrapper is dropped and the inner signature judged by ERC-1271;
 * - otherwise the factory must be one of the chain's `wallet_factories`, and one `eth_call` per hash
 *   (viem's deployless call via a factory: EIP-7679's counterfactual call contract) runs the factory
 *   call, fails unless the signer's address then has code, and asks that code's `isValidSignature` of
 *   the inner signature. Nothing is sent; the caller deploys (wallet-deployments.ts) only what passed.
 * Contracts never see a wrapper: callers get the inner signatures, and the deployment still needed.
 *
 * viem's `verifyHash` (ERC-6492's universal validator) gives the same answer for a wrapped signature,
 * valid or not (test/e2e/safe-wallet.test.ts compares them), but cannot tell a wrong signature from a
 * factory call that deploys another wallet, falls back to ECDSA for an address with code, and accepts
 * ERC-8010 signatures that neither the escrow nor USDC understand; hence this routing.
 */
import { Context, Effect, Layer, Schema } from "effect";
import {
  BaseError,
  CounterfactualDeploymentFailedError,
  decodeFunctionResult,
  ExecutionRevertedError,
  encodeFunctionData,
  getAddress,
  type Hex,
  isAddressEqual,
  isErc6492Signature,
  parseAbi,
  parseErc6492Signature,
  RawContractError,
  recoverAddress,
} from "viem";
import { InvalidRequest, type Unavailable } from "../errors.ts";
import { ChainClients, ChainUnavailable } from "./chain-clients.ts";
import type { ResolvedChain } from "./config.ts";
import { unavailable } from "./unavailable.ts";

/**
 * A signature as the hosted pages take it: 65 bytes (an EOA's, a one-owner Safe's) or more (a Safe with
 * several owners, an ERC-6492 wrapper), at most 4 KiB: the relayer pays for every byte it carries.
 */
export const SignatureHex = Schema.String.check(
  Schema.isPattern(/^0x(?:[0-9a-fA-F]{2}){65,4096}$/, {
    message: "must be a 0x-prefixed hex signature of 65 to 4,096 bytes",
  }),
);

/** The factory call that deploys a counterfactual wallet, as its ERC-6492 wrapper names it. */
export interface WalletDeployment {
  readonly factory: Hex;
  readonly data: Hex;
}

/** A signature without its ERC-6492 wrapper, and the deployment the wrapper named (null: none). */
export interface UnwrappedSignature {
  readonly signature: Hex;
  readonly deployment: WalletDeployment | null;
}

/** Splits an ERC-6492 wrapper; a signature without the suffix is its own. Undefined: a malformed wrapper. */
export const unwrapErc6492 = (signature: Hex): UnwrappedSignature | undefined => {
  if (!isErc6492Signature(signature)) return { signature, deployment: null };
  try {
    const parsed = parseErc6492Signature(signature);
    if (parsed.address === undefined || parsed.data === undefined) return undefined;
    return {
      signature: parsed.signature,
      deployment: { factory: getAddress(parsed.address), data: parsed.data },
    };
  } catch {
    return undefined;
  }
};

/** Whether the chain config lets the relayer call this factory. */
export const factoryAllowed = (chain: ResolvedChain, factory: Hex) =>
  (chain.wallet_factories ?? []).some((allowed) => isAddressEqual(allowed as Hex, factory));

/** One hash a signer signed, and what to call it in an answer. */
export interface SignedHash {
  readonly hash: Hex;
  readonly signature: Hex;
  /** The request's field that carried the signature. */
  readonly param: string;
  /** What was signed, for the refusal's message ("these terms"). */
  readonly what: string;
}

export interface CheckedSignatures {
  /** Each signature as contracts take it (an ERC-6492 wrapper's inner signature), in the given order. */
  readonly signatures: readonly Hex[];
  /** The factory call that deploys the signer, when it has no code yet and signed through ERC-6492. */
  readonly deployment: WalletDeployment | null;
  /** Whether the signer is a contract (or will be, once deployed): its signatures are ERC-1271's. */
  readonly contract: boolean;
}

const erc1271Abi = parseAbi([
  "function isValidSignature(bytes32 hash, bytes signature) view returns (bytes4 magicValue)",
]);
const ERC1271_MAGIC = "0x1626ba7e";
/** Recovered signers kept in memory (wallet-signatures.ts `recover`). */
const RECOVERED_KEPT = 4096;

const refuse =
  (code: "signature_invalid" | "wallet_factory_not_allowed" | "wallet_deployment_failed") =>
  (param: string, message: string) =>
    new InvalidRequest({ code, message, param });
const invalid = refuse("signature_invalid");

/** How an `eth_call` ended: its data, or a revert (and whether it was the counterfactual deployment's). */
type CallOutcome =
  | { readonly reverted: false; readonly data: Hex }
  | { readonly reverted: true; readonly deploymentFailed: boolean };

const revertOf = (error: unknown): CallOutcome | undefined => {
  if (error instanceof CounterfactualDeploymentFailedError) return { reverted: true, deploymentFailed: true };
  if (
    error instanceof BaseError &&
    error.walk((e) => e instanceof ExecutionRevertedError || e instanceof RawContractError) !== null
  )
    return { reverted: true, deploymentFailed: false };
  return undefined;
};

const isMagic = (data: Hex) => {
  try {
    return (
      decodeFunctionResult({ abi: erc1271Abi, functionName: "isValidSignature", data }) === ERC1271_MAGIC
    );
  } catch {
    return false;
  }
};

const make = Effect.gen(function* () {
  const clients = yield* ChainClients;

  /** An `eth_call` whose revert is an answer; a chain that does not answer is 503. */
  const call = (
    chain: ResolvedChain,
    what: string,
    request: Parameters<ReturnType<typeof clients.client>["call"]>[0],
  ) =>
    Effect.tryPromise({
      try: () => clients.client(chain).call(request),
      catch: (error) => error,
    }).pipe(
      Effect.map((result): CallOutcome => ({ reverted: false, data: result.data ?? "0x" })),
      Effect.catch((error) => {
        const revert = revertOf(error);
        if (revert !== undefined) return Effect.succeed(revert);
        const message = `${what}: ${String(error).split("\n")[0] ?? "no answer"}`;
        return Effect.fail(unavailable(new ChainUnavailable({ chainId: chain.id, message })));
      }),
    );

  const isValidSignatureData = (hash: Hex, signature: Hex) =>
    encodeFunctionData({ abi: erc1271Abi, functionName: "isValidSignature", args: [hash, signature] });

  /** ERC-1271 of a deployed wallet: valid only when it answers the magic value. */
  const checkDeployed = (chain: ResolvedChain, signer: Hex, signed: SignedHash, signature: Hex) =>
    Effect.gen(function* () {
      const outcome = yield* call(chain, "isValidSignature", {
        to: signer,
        data: isValidSignatureData(signed.hash, signature),
      });
      if (outcome.reverted || !isMagic(outcome.data))
        return yield* invalid(
          signed.param,
          `The wallet ${signer} does not accept this signature of ${signed.what} (ERC-1271).`,
        );
    });

  /** ERC-1271 of the wallet the factory call would deploy, in one simulated call: nothing is sent. */
  const checkCounterfactual = (
    chain: ResolvedChain,
    signer: Hex,
    deployment: WalletDeployment,
    signed: SignedHash,
    signature: Hex,
  ) =>
    Effect.gen(function* () {
      const outcome = yield* call(chain, "counterfactual isValidSignature", {
        factory: deployment.factory,
        factoryData: deployment.data,
        to: signer,
        data: isValidSignatureData(signed.hash, signature),
      });
      if (outcome.reverted && outcome.deploymentFailed)
        return yield* refuse("wallet_deployment_failed")(
          signed.param,
          `The ERC-6492 signature's factory call (factory ${deployment.factory}) does not deploy a wallet at ${signer}.`,
        );
      if (outcome.reverted || !isMagic(outcome.data))
        return yield* invalid(
          signed.param,
          `The wallet ${signer}, once deployed by its factory, would not accept this signature of ${signed.what} (ERC-6492, ERC-1271).`,
        );
    });

  /**
   * The signers recovered lately, by hash and signature: an x402 payment is verified, then settled, with
   * the same signature, and a recovery is the costliest step of either (about a millisecond of CPU).
   */
  const recoveredLately = new Map<string, Hex | null>();
  const recover = (hash: Hex, signature: Hex) =>
    Effect.gen(function* () {
      const key = `${hash}:${signature}`;
      const known = recoveredLately.get(key);
      if (known !== undefined) return known;
      const recovered = yield* Effect.tryPromise(() => recoverAddress({ hash, signature })).pipe(
        Effect.map((address): Hex | null => address),
        Effect.orElseSucceed(() => null),
      );
      if (recoveredLately.size >= RECOVERED_KEPT) {
        const oldest = recoveredLately.keys().next();
        if (!oldest.done) recoveredLately.delete(oldest.value);
      }
      recoveredLately.set(key, recovered);
      return recovered;
    });

  /** ECDSA, for a signer without code. */
  const checkRecovered = (signer: Hex, signed: SignedHash, signature: Hex) =>
    Effect.gen(function* () {
      const recovered = yield* recover(signed.hash, signature);
      if (recovered === null || !isAddressEqual(recovered, signer))
        return yield* invalid(signed.param, `The signature is not ${signer}'s of ${signed.what}.`);
    });

  /**
   * Checks each signature of `signer`. ERC-6492 wrappers among them must name one deployment; a signature
   * without a wrapper is judged against the same deployment (a counterfactual wallet's signatures all
   * need it). With `unwrapOnly` a signer that has code gets its signatures unwrapped, not judged: for a
   * caller whose contract call (simulated next) judges them as the chain will.
   */
  const verify = (
    chain: ResolvedChain,
    signer: Hex,
    signed: ReadonlyArray<SignedHash>,
    options: { readonly unwrapOnly?: boolean } = {},
  ): Effect.Effect<CheckedSignatures, InvalidRequest | Unavailable> =>
    Effect.gen(function* () {
      const unwrapped: UnwrappedSignature[] = [];
      for (const item of signed) {
        const parts = unwrapErc6492(item.signature);
        if (parts === undefined)
          return yield* invalid(
            item.param,
            "The signature ends in ERC-6492's suffix but is not a valid wrapper.",
          );
        unwrapped.push(parts);
      }
      const signatures = unwrapped.map((u) => u.signature);
      const wrapped = unwrapped.flatMap((u, i) => (u.deployment === null ? [] : [{ ...u.deployment, i }]));
      const deployment = wrapped[0];
      if (
        deployment !== undefined &&
        wrapped.some((d) => !isAddressEqual(d.factory, deployment.factory) || d.data !== deployment.data)
      )
        return yield* invalid(
          signed[deployment.i]?.param ?? "signature",
          "The ERC-6492 signatures name different wallet deployments.",
        );
      const code = yield* clients
        .rpc(chain, "code", () => clients.client(chain).getCode({ address: signer }))
        .pipe(Effect.mapError(unavailable));
      if (code !== undefined && code !== "0x") {
        if (!options.unwrapOnly)
          for (const [i, item] of signed.entries())
            yield* checkDeployed(chain, signer, item, signatures[i] as Hex);
        return { signatures, deployment: null, contract: true };
      }
      if (deployment !== undefined) {
        if (!factoryAllowed(chain, deployment.factory))
          return yield* refuse("wallet_factory_not_allowed")(
            signed[deployment.i]?.param ?? "signature",
            `The ERC-6492 signature would deploy the wallet through ${deployment.factory}, which is not a wallet factory this chain allows.`,
          );
        const { factory, data } = deployment;
        for (const [i, item] of signed.entries())
          yield* checkCounterfactual(chain, signer, { factory, data }, item, signatures[i] as Hex);
        return { signatures, deployment: { factory, data }, contract: true };
      }
      for (const [i, item] of signed.entries()) yield* checkRecovered(signer, item, signatures[i] as Hex);
      return { signatures, deployment: null, contract: false };
    });

  return { verify };
});

export class WalletSignatures extends Context.Service<WalletSignatures>()("WalletSignatures", { make }) {
  static readonly layer = Layer.effect(WalletSignatures, make);
}
