/**
 * The relayer deploys a customer's counterfactual smart wallet before it sends what the wallet signed
 * through ERC-6492: the factory call that wallet-signatures.ts simulated (code at the address afterwards,
 * the inner signatures valid there), to a factory of the chain's `wallet_factories` only. The escrow and
 * the token then see an ordinary deployed wallet; neither ever calls a factory.
 *
 * The relayer pays for the deployment (about 260,000 gas for a one-owner Safe 1.4.1), so it is bounded:
 * - one deployment per address, ever: the transaction's purpose names the address, so the same address
 *   again (from any flow, any process) is answered with the first transaction, whatever became of it;
 * - an address that has code needs none (wallet-signatures.ts asks for no deployment then);
 * - each caller counts it against its own daily limit: the transaction's `action` starts with the
 *   caller's prefix (a mandate's authorizations, a payment's gasless transfers), and the caller's `admit`
 *   checks that limit, under its row lock, in the database transaction that records the deployment.
 * Answers once the deployment is mined and the address has code: the request waits at most
 * MINED_WITHIN, then answers 503 (the same request later gets the same transaction), because the escrow's
 * and the token's simulation of what follows needs the wallet's code. A multicall that deploys and
 * authorizes at once would spare the wait, but authorisations go in `authorizeMany` groups and a
 * deployment happens once per wallet.
 */
import { Context, Effect, Layer } from "effect";
import { SqlClient, type SqlError } from "effect/sql";
import type { Hex } from "viem";
import { InvalidRequest, Unavailable } from "../errors.ts";
import { ChainClients } from "./chain-clients.ts";
import type { ResolvedChain } from "./config.ts";
import { GasCosts } from "./gas-costs.ts";
import { Relayer } from "./relayer.ts";
import { relayerUnavailable, unavailable } from "./unavailable.ts";
import { factoryAllowed, type WalletDeployment } from "./wallet-signatures.ts";

/** How long a request waits for the deployment to be mined before it answers 503 (retry: same answer). */
const MINED_WITHIN = "30 seconds";

/** The purpose of the relayer's transaction deploying a wallet: one per address and chain, ever. */
export const walletDeploymentPurpose = (chainId: number, address: Hex) =>
  `wallet-deployment:${chainId}:${address.toLowerCase()}`;

export interface DeploymentRequest<E> {
  /** The counterfactual wallet. */
  readonly address: Hex;
  readonly deployment: WalletDeployment;
  /** The caller's action for this deployment, under the prefix its daily limit counts. */
  readonly action: string;
  /** The object whose gas the deployment is accounted to (gas-costs.ts). */
  readonly source: { readonly object: "mandate" | "payment"; readonly id: string };
  /** The merchant of that object, whose share of the relayer's budget the deployment counts against. */
  readonly merchantId: string;
  /** The caller's checks (its row lock, its daily limit), in the transaction that records the deployment. */
  readonly admit: Effect.Effect<void, E>;
}

const failed = (address: Hex, why: string) =>
  new InvalidRequest({
    code: "wallet_deployment_failed",
    message: `The wallet ${address} could not be deployed (${why}). Deploy it from the wallet, then sign again.`,
    param: "signature",
  });

const make = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient;
  const clients = yield* ChainClients;
  const relayer = yield* Relayer;
  const gasCosts = yield* GasCosts;

  const hasCode = (chain: ResolvedChain, address: Hex) =>
    clients
      .rpc(chain, "code", () => clients.client(chain).getCode({ address }))
      .pipe(
        Effect.map((code) => code !== undefined && code !== "0x"),
        Effect.mapError(unavailable),
      );

  /** Deploys the wallet (or finds its deployment) and waits until the address has code. */
  const deploy = <E>(
    chain: ResolvedChain,
    request: DeploymentRequest<E>,
  ): Effect.Effect<void, E | InvalidRequest | Unavailable | SqlError.SqlError> =>
    Effect.gen(function* () {
      const { address, deployment } = request;
      if (!factoryAllowed(chain, deployment.factory))
        return yield* failed(address, `${deployment.factory} is not a wallet factory this chain allows`);
      if (relayer.address(chain.id) === undefined) return yield* relayerUnavailable("deploy wallets");
      const purpose = walletDeploymentPurpose(chain.id, address);
      if ((yield* relayer.find(chain.id, purpose)) === undefined)
        yield* sql.withTransaction(
          Effect.gen(function* () {
            yield* request.admit;
            yield* relayer
              .submit(chain.id, {
                to: deployment.factory,
                data: deployment.data,
                purpose,
                action: request.action,
                merchants: [request.merchantId],
              })
              .pipe(
                Effect.catchTag("RelayerError", (error) =>
                  Effect.fail(
                    error.reason === "simulation_failed"
                      ? failed(address, "the factory call reverts")
                      : unavailable(error),
                  ),
                ),
              );
            yield* gasCosts.carries(chain.id, purpose, "wallet_deployment", request.source.object, [
              request.source.id,
            ]);
          }),
        );
      const mined = yield* relayer.waitMined(chain.id, purpose, MINED_WITHIN);
      if (mined === undefined)
        return yield* new Unavailable({
          code: "wallet_deployment_pending",
          message: `The wallet ${address} is being deployed; submit the same signatures again in a few seconds.`,
        });
      // A reverted deployment may still have left code: someone else deployed the wallet first.
      if (!(yield* hasCode(chain, address)))
        return yield* failed(
          address,
          `its deployment ${mined.hash} ${mined.status} without code at the address`,
        );
    });

  return { deploy };
});

export class WalletDeployments extends Context.Service<WalletDeployments>()("WalletDeployments", { make }) {
  static readonly layer = Layer.effect(WalletDeployments, make);
}
