/**
 * The pure part of chains/wallet-signatures.ts: ERC-6492 wrappers taken apart (viem's parser, with a
 * malformed wrapper refused rather than thrown), the chain's factory allowlist, and the signature text
 * the hosted pages take. What a wallet answers is the e2e test's (test/e2e/safe-wallet.test.ts).
 */
import { Schema } from "effect";
import { type Hex, serializeErc6492Signature } from "viem";
import { describe, expect, it } from "vitest";
import type { ResolvedChain } from "../../service/chains/config.ts";
import { factoryAllowed, SignatureHex, unwrapErc6492 } from "../../service/chains/wallet-signatures.ts";

const FACTORY = "0x4e1DCf7AD4e460CfD30791CCC4F9c8a4f820ec67" as const;
const inner = `0x${"ab".repeat(64)}1b` as Hex;
const SUFFIX = "6492".repeat(16);

describe("ERC-6492 wrappers", () => {
  it("returns a plain signature as it is, with no deployment", () => {
    expect(unwrapErc6492(inner)).toEqual({ signature: inner, deployment: null });
  });

  it("takes a wrapper apart into the factory call and the inner signature", () => {
    const wrapped = serializeErc6492Signature({
      address: FACTORY,
      data: "0x1688f0b9deadbeef",
      signature: inner,
    });
    expect(wrapped.endsWith(SUFFIX)).toBe(true);
    expect(unwrapErc6492(wrapped)).toEqual({
      signature: inner,
      deployment: { factory: FACTORY, data: "0x1688f0b9deadbeef" },
    });
  });

  it("refuses a signature that ends in the suffix but is no wrapper", () => {
    expect(unwrapErc6492(`0x${"00".repeat(10)}${SUFFIX}`)).toBeUndefined();
    expect(unwrapErc6492(`0x${"ff".repeat(96)}${SUFFIX}`)).toBeUndefined();
  });
});

describe("the chain's wallet factories", () => {
  const chain = (factories?: string[]) =>
    ({ id: 1, ...(factories ? { wallet_factories: factories } : {}) }) as unknown as ResolvedChain;
  it("allows only listed factories, in any letter case", () => {
    expect(factoryAllowed(chain([FACTORY.toLowerCase()]), FACTORY)).toBe(true);
    expect(factoryAllowed(chain([FACTORY]), "0x0000000000000000000000000000000000000001")).toBe(false);
    expect(factoryAllowed(chain(), FACTORY)).toBe(false);
  });
});

describe("the signature text the hosted pages take", () => {
  const accepts = (text: string) => Schema.is(SignatureHex)(text);
  it("takes 65 to 4,096 whole bytes of hex", () => {
    expect(accepts(inner)).toBe(true);
    expect(accepts(`0x${"ab".repeat(130)}`)).toBe(true);
    expect(accepts(`0x${"ab".repeat(4096)}`)).toBe(true);
    expect(accepts(`0x${"ab".repeat(64)}`)).toBe(false);
    expect(accepts(`0x${"ab".repeat(65)}a`)).toBe(false);
    expect(accepts(`0x${"ab".repeat(4097)}`)).toBe(false);
    expect(accepts(`${"ab".repeat(65)}`)).toBe(false);
  });
});
