/**
 * Private keys anyone can look up: the accounts of the development mnemonics that anvil, Hardhat and
 * Ganache print at every start. Funds or rights given to one of them on a real chain are taken within
 * minutes by bots that watch these addresses, so neither the relayer nor the deployer may use one there.
 */
import type { Hex } from "viem";
import { mnemonicToAccount, privateKeyToAccount } from "viem/accounts";

const PUBLIC_MNEMONICS = [
  { mnemonic: "test test test test test test test test test test test junk", name: "anvil's and Hardhat's" },
  {
    mnemonic: "myth like bonus scare over problem client lizard pioneer submit female collect",
    name: "Ganache's",
  },
] as const;

/** Accounts derived from each mnemonic (anvil prints 10, Hardhat 20; `anvil -a N` goes further). */
const ACCOUNTS_PER_MNEMONIC = 30;

let known: ReadonlyMap<string, string> | undefined;

const hex = (key: Uint8Array | null): Hex => `0x${Buffer.from(key ?? []).toString("hex")}`;

/** Address (lower case) → which public account it is. Derived once, on first use. */
const publicAccounts = (): ReadonlyMap<string, string> => {
  if (known) return known;
  const accounts = new Map<string, string>();
  for (const { mnemonic, name } of PUBLIC_MNEMONICS) {
    // The seed once (PBKDF2 is the slow part), then each account as a child of m/44'/60'/0'/0.
    const parent = mnemonicToAccount(mnemonic, { path: "m/44'/60'/0'/0" }).getHdKey();
    for (let index = 0; index < ACCOUNTS_PER_MNEMONIC; index++)
      accounts.set(
        privateKeyToAccount(hex(parent.deriveChild(index).privateKey)).address.toLowerCase(),
        `account ${index} of ${name} default mnemonic`,
      );
  }
  // The smallest private keys are in every list of "keys with a balance" ever published.
  for (let n = 1n; n <= 16n; n++)
    accounts.set(
      privateKeyToAccount(`0x${n.toString(16).padStart(64, "0")}`).address.toLowerCase(),
      `the private key ${n}`,
    );
  known = accounts;
  return accounts;
};

/** Which publicly known key `key` is, or undefined for a key of one's own. */
export const publiclyKnownKey = (key: Hex): string | undefined =>
  publicAccounts().get(privateKeyToAccount(key).address.toLowerCase());

/** Which publicly known key controls `address`, or undefined. */
export const publiclyKnownAddress = (address: string): string | undefined =>
  publicAccounts().get(address.toLowerCase());
