/**
 * What our contracts' code on a chain must be, as compiled (abis/): the escrow, and the collector its
 * constructor deploys. Their runtime code holds immutables (the escrow's EIP-712 domain, which names the
 * chain and the escrow's own address, and the collector's address; the collector's escrow), so code is
 * compared with those bytes zeroed, as the compiler leaves them. Pure.
 */
import { type Hex, keccak256 } from "viem";
import { DepositCollectorImmutables, DepositCollectorRuntime } from "../../abis/DepositCollector.ts";
import { MandateEscrowImmutables, MandateEscrowRuntime } from "../../abis/MandateEscrow.ts";

export interface CompiledCode {
  readonly name: string;
  /** Runtime code with zeros where the immutables go. */
  readonly runtime: Hex;
  /** [byte offset, length] of each immutable in the runtime code. */
  readonly immutables: ReadonlyArray<readonly [number, number]>;
}

export const ESCROW_CODE: CompiledCode = {
  name: "MandateEscrow",
  runtime: MandateEscrowRuntime,
  immutables: MandateEscrowImmutables,
};
export const COLLECTOR_CODE: CompiledCode = {
  name: "DepositCollector",
  runtime: DepositCollectorRuntime,
  immutables: DepositCollectorImmutables,
};

/** `code` with its immutables zeroed (code of another length is returned as it is). */
const withoutImmutables = (code: Hex, compiled: CompiledCode): Hex => {
  if (code.length !== compiled.runtime.length) return code;
  let hex = code.slice(2).toLowerCase();
  for (const [start, length] of compiled.immutables)
    hex = `${hex.slice(0, start * 2)}${"0".repeat(length * 2)}${hex.slice((start + length) * 2)}`;
  return `0x${hex}`;
};

/** The hash that identifies a contract's code whatever its immutables hold. */
export const codeHashOf = (code: Hex, compiled: CompiledCode): Hex =>
  keccak256(withoutImmutables(code, compiled));

/** The compiled code's own hash, as `codeHashOf` computes it for code on a chain. */
export const compiledCodeHash = (compiled: CompiledCode): Hex => keccak256(compiled.runtime);

export { collectorAddress } from "./collector-address.ts";
