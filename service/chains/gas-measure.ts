/**
 * How much gas a call uses, and the limit the relayer signs for it. One `eth_createAccessList` run
 * rather than `eth_estimateGas`'s search, which ran the call about six times (1.8 s for a chargeMany of
 * 200 on anvil against 0.3 s). Some hosted RPCs refuse `eth_createAccessList`: a chain whose node
 * answered "method not found / not supported" is measured with `eth_estimateGas` from then on (per
 * process), as is a chain configured with `gas.gas_limit_from: "estimate_gas"`.
 */
import { BaseError, type Chain, type Hex, type PublicClient, RpcRequestError, type Transport } from "viem";
import type { ResolvedChain } from "./config.ts";

export interface MeasuredCall {
  readonly from: Hex;
  readonly to: Hex;
  readonly data: Hex;
  readonly at: "pending" | "latest";
}

const REFUSED_CODES = new Set([-32601, -32004]);

/** The node does not offer the method (JSON-RPC -32601 / -32004, or its words for it). */
export const refusedMethod = (error: unknown): boolean => {
  const code =
    error instanceof BaseError
      ? (error.walk((e) => typeof (e as { code?: unknown }).code === "number") as { code?: number } | null)
          ?.code
      : undefined;
  if (code !== undefined && REFUSED_CODES.has(code)) return true;
  const text = error instanceof RpcRequestError ? error.details : String(error);
  return /method .*(not found|not supported|does not exist|is not available|unsupported)|unsupported method/i.test(
    text,
  );
};

const toQuantity = (hex: unknown): bigint => {
  if (typeof hex !== "string" || !/^0x[0-9a-fA-F]{1,64}$/.test(hex))
    throw new Error(`eth_estimateGas answered ${String(hex)}`);
  return BigInt(hex);
};

/**
 * Gas for one call: the gas an access-list run used, or `eth_estimateGas`'s limit where the node
 * refuses access lists (a little more than used: enough for the refund and the 63/64 rule). `refusing`
 * holds the chains whose node refused, so each asks for the refused method once.
 */
export const measureGas = async (
  client: PublicClient<Transport, Chain>,
  chain: ResolvedChain,
  call: MeasuredCall,
  refusing: Set<number>,
): Promise<bigint> => {
  const estimate = async () =>
    toQuantity(
      await client.request({
        method: "eth_estimateGas",
        params: [{ from: call.from, to: call.to, data: call.data }, call.at],
      }),
    );
  if (chain.gas?.gas_limit_from === "estimate_gas" || refusing.has(chain.id)) return estimate();
  try {
    const result = await client.createAccessList({
      account: call.from,
      to: call.to,
      data: call.data,
      blockTag: call.at,
    });
    return result.gasUsed;
  } catch (error) {
    if (!refusedMethod(error)) throw error;
    refusing.add(chain.id);
    return estimate();
  }
};

/**
 * Gas limit for the gas one simulated run used: that figure is net of refunds (at most a fifth of it,
 * EIP-3529) and the run had its access list warm, so the limit keeps 50% of headroom: refund, the 63/64
 * rule, cold accesses and a little state change before it is mined.
 */
export const gasLimitForUsed = (used: bigint): bigint => (used * 3n) / 2n;
