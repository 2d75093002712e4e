/**
 * What the service reads of a token on chain: whether it takes EIP-2612 permits (its EIP-712 domain,
 * read once per token: it never changes), an owner's permit nonce, balance, and the allowance the owner
 * gave the escrow.
 */
import { Context, Effect, Layer, Option } from "effect";
import { erc20Abi, type Hex, parseAbi } from "viem";
import { ChainClients, type ChainUnavailable } from "../chains/chain-clients.ts";
import type { ResolvedChain } from "../chains/config.ts";
import type { PermitDomain } from "./terms.ts";

const permitAbi = parseAbi([
  "function nonces(address owner) view returns (uint256)",
  "function eip712Domain() view returns (bytes1 fields, string name, string version, uint256 chainId, address verifyingContract, bytes32 salt, uint256[] extensions)",
]);

const make = Effect.gen(function* () {
  const clients = yield* ChainClients;
  const domains = new Map<string, PermitDomain>();

  /** The token's permit domain; none when the token has no EIP-5267 domain (no permit). */
  const permitDomain = (chain: ResolvedChain, token: Hex): Effect.Effect<Option.Option<PermitDomain>> => {
    const key = `${chain.id}:${token.toLowerCase()}`;
    const known = domains.get(key);
    if (known) return Effect.succeed(Option.some(known));
    return clients
      .rpc(chain, "eip712Domain", () =>
        clients.client(chain).readContract({ address: token, abi: permitAbi, functionName: "eip712Domain" }),
      )
      .pipe(
        Effect.map(
          ([, name, version, chainId, verifyingContract]): PermitDomain => ({
            name,
            version,
            chainId: Number(chainId),
            verifyingContract,
          }),
        ),
        Effect.tap((domain) => Effect.sync(() => domains.set(key, domain))),
        Effect.option,
      );
  };

  const permitNonce = (
    chain: ResolvedChain,
    token: Hex,
    owner: Hex,
  ): Effect.Effect<bigint, ChainUnavailable> =>
    clients.rpc(chain, "nonces", () =>
      clients
        .client(chain)
        .readContract({ address: token, abi: permitAbi, functionName: "nonces", args: [owner] }),
    );

  const allowance = (
    chain: ResolvedChain,
    token: Hex,
    owner: Hex,
    spender: Hex,
  ): Effect.Effect<bigint, ChainUnavailable> =>
    clients.rpc(chain, "allowance", () =>
      clients
        .client(chain)
        .readContract({ address: token, abi: erc20Abi, functionName: "allowance", args: [owner, spender] }),
    );

  const balance = (chain: ResolvedChain, token: Hex, owner: Hex): Effect.Effect<bigint, ChainUnavailable> =>
    clients.rpc(chain, "balance", () =>
      clients
        .client(chain)
        .readContract({ address: token, abi: erc20Abi, functionName: "balanceOf", args: [owner] }),
    );

  return { permitDomain, permitNonce, allowance, balance };
});

export class TokenReads extends Context.Service<TokenReads>()("TokenReads", { make }) {
  static readonly layer = Layer.effect(TokenReads, make);
}
