/** Plain-words text and small encodings of the pay page; pure, so they are unit-tested. */
import type { Session } from "./types.ts";

export { plural, sameAddress, shortAddress } from "../../hosted-page/client/text.ts";

/** "25 USDC" */
export const money = (decimal: string, session: Session) => `${decimal} ${session.token.symbol}`;

export const isZero = (decimal: string) => /^0*(\.0*)?$/.test(decimal);

/** The time left before expiry: "14:59", "1:04:59", "3 days"; null once it is up. */
export const timeLeftText = (seconds: number): string | null => {
  if (seconds <= 0) return null;
  const s = Math.floor(seconds);
  if (s >= 2 * 86_400) return `${Math.floor(s / 86_400)} days`;
  const hours = Math.floor(s / 3600);
  const minutes = Math.floor((s % 3600) / 60);
  const rest = String(s % 60).padStart(2, "0");
  return hours > 0 ? `${hours}:${String(minutes).padStart(2, "0")}:${rest}` : `${minutes}:${rest}`;
};

const word = (hex: string) => hex.padStart(64, "0");

/** Calldata of an ERC-20 `transfer(to, units)`: the selector and two 32-byte words. */
export const transferCalldata = (to: string, units: bigint): string => {
  if (!/^0x[0-9a-fA-F]{40}$/.test(to)) throw new Error(`not an address: ${to}`);
  if (units < 0n || units >= 2n ** 256n) throw new Error("amount out of range");
  return `0xa9059cbb${word(to.slice(2).toLowerCase())}${word(units.toString(16))}`;
};

/** 32 random bytes in hex: an EIP-3009 nonce (random, never sequential). */
export const randomNonce = (bytes: Uint8Array): string => {
  if (bytes.length !== 32) throw new Error("a nonce is 32 bytes");
  return `0x${Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("")}`;
};
