/**
 * What the service reads of a token on chain: its EIP-712 domain (in which EIP-2612 permits and EIP-3009
 * authorizations are signed), whether it takes permits, an owner's permit nonce, balance, and the
 * allowance the owner gave the escrow. A token's domain and permit support never change, so each is read
 * once; only definite answers are kept (a chain that did not answer is asked again next time).
 */
import { Context, Effect, Layer, Option } from "effect";
import { domainSeparator, erc20Abi, getAddress, type Hex, parseAbi, zeroAddress } from "viem";
import { ChainClients, ChainUnavailable, lacksFunction } from "../chains/chain-clients.ts";
import type { ResolvedChain } from "../chains/config.ts";
import type { TokenDomain } from "./terms.ts";

const domainAbi = parseAbi([
  "function nonces(address owner) view returns (uint256)",
  "function eip712Domain() view returns (bytes1 fields, string name, string version, uint256 chainId, address verifyingContract, bytes32 salt, uint256[] extensions)",
  "function name() view returns (string)",
  "function version() view returns (string)",
  "function DOMAIN_SEPARATOR() view returns (bytes32)",
]);

const make = Effect.gen(function* () {
  const clients = yield* ChainClients;
  const domains = new Map<string, Option.Option<TokenDomain>>();
  const permits = new Map<string, Option.Option<TokenDomain>>();

  /** A view call whose "the token has no such function" is None, and whose transport failure fails. */
  const optionalRead = <A>(chain: ResolvedChain, what: string, read: () => Promise<A>) =>
    Effect.tryPromise({ try: read, catch: (error) => error }).pipe(
      Effect.map(Option.some),
      Effect.catch((error) =>
        lacksFunction(error)
          ? Effect.succeed(Option.none<A>())
          : Effect.fail(
              new ChainUnavailable({
                chainId: chain.id,
                message: `${what}: ${String(error).split("\n")[0]}`,
              }),
            ),
      ),
    );

  const cachedPerToken = (
    cache: Map<string, Option.Option<TokenDomain>>,
    chain: ResolvedChain,
    token: Hex,
    read: Effect.Effect<Option.Option<TokenDomain>, ChainUnavailable>,
  ) => {
    const key = `${chain.id}:${token.toLowerCase()}`;
    const known = cache.get(key);
    if (known) return Effect.succeed(known);
    return Effect.tap(read, (answer) => Effect.sync(() => cache.set(key, answer)));
  };

  /**
   * The token's EIP-712 domain: from EIP-5267's `eip712Domain()` where the token has it, else (as Circle's
   * USDC, which lacks it) from `name()` and `version()`, taken only when they hash to the token's own
   * `DOMAIN_SEPARATOR()`. None when neither establishes it.
   */
  const domain = (
    chain: ResolvedChain,
    token: Hex,
  ): Effect.Effect<Option.Option<TokenDomain>, ChainUnavailable> =>
    cachedPerToken(
      domains,
      chain,
      token,
      Effect.gen(function* () {
        const client = clients.client(chain);
        const declared = yield* optionalRead(chain, "eip712Domain", () =>
          client.readContract({ address: token, abi: domainAbi, functionName: "eip712Domain" }),
        );
        if (Option.isSome(declared)) {
          const [, name, version, chainId, verifyingContract] = declared.value;
          return Option.some({ name, version, chainId: Number(chainId), verifyingContract });
        }
        const [name, version, separator] = yield* Effect.all(
          [
            optionalRead(chain, "name", () =>
              client.readContract({ address: token, abi: domainAbi, functionName: "name" }),
            ),
            optionalRead(chain, "version", () =>
              client.readContract({ address: token, abi: domainAbi, functionName: "version" }),
            ),
            optionalRead(chain, "DOMAIN_SEPARATOR", () =>
              client.readContract({ address: token, abi: domainAbi, functionName: "DOMAIN_SEPARATOR" }),
            ),
          ],
          { concurrency: "unbounded" },
        );
        if (Option.isNone(name) || Option.isNone(version) || Option.isNone(separator)) return Option.none();
        const candidate: TokenDomain = {
          name: name.value,
          version: version.value,
          chainId: chain.id,
          verifyingContract: getAddress(token),
        };
        return domainSeparator({ domain: candidate }).toLowerCase() === separator.value.toLowerCase()
          ? Option.some(candidate)
          : Option.none();
      }),
    );

  /** The domain of a token that takes EIP-2612 permits (it has a domain and answers `nonces`); else None. */
  const permitDomain = (
    chain: ResolvedChain,
    token: Hex,
  ): Effect.Effect<Option.Option<TokenDomain>, ChainUnavailable> =>
    cachedPerToken(
      permits,
      chain,
      token,
      Effect.gen(function* () {
        const established = yield* domain(chain, token);
        if (Option.isNone(established)) return established;
        const nonces = yield* optionalRead(chain, "nonces", () =>
          clients
            .client(chain)
            .readContract({ address: token, abi: domainAbi, functionName: "nonces", args: [zeroAddress] }),
        );
        return Option.isSome(nonces) ? established : Option.none();
      }),
    );

  const permitNonce = (
    chain: ResolvedChain,
    token: Hex,
    owner: Hex,
  ): Effect.Effect<bigint, ChainUnavailable> =>
    clients.rpc(chain, "nonces", () =>
      clients
        .client(chain)
        .readContract({ address: token, abi: domainAbi, functionName: "nonces", args: [owner] }),
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

  return { domain, permitDomain, permitNonce, allowance, balance };
});

export class TokenReads extends Context.Service<TokenReads>()("TokenReads", { make }) {
  static readonly layer = Layer.effect(TokenReads, make);
}
