/**
 * The wallets installed in the browser, found by EIP-6963: the page asks (`eip6963:requestProvider`)
 * and every wallet answers with its provider and its info (`eip6963:announceProvider`), now or later.
 * `window.ethereum` stands in only when no wallet announces itself. Announcements are checked before
 * use: another script on the page could send one, so a name is text and an icon only a data image.
 */
import type { Eip1193Provider } from "./wallet.ts";

export interface WalletInfo {
  /** Unique per page load (EIP-6963): a second announcement with the same uuid is ignored. */
  readonly uuid: string;
  readonly name: string;
  /** A `data:image/…` URI, or null when the wallet gave none (or something else). */
  readonly icon: string | null;
  /** Reverse domain name (`io.metamask`): stable across loads, so a choice is remembered by it. */
  readonly rdns: string;
}

export interface Wallet {
  readonly info: WalletInfo;
  readonly provider: Eip1193Provider;
}

export interface Wallets {
  /** The announced wallets in the order they came; else `window.ethereum`; else none. */
  list(): readonly Wallet[];
  /** Calls `listener` whenever another wallet announces itself. */
  subscribe(listener: () => void): void;
}

/** The window as discovery uses it (an EventTarget in tests). */
export type WalletWindow = EventTarget & { readonly ethereum?: unknown };

export const ANNOUNCE_EVENT = "eip6963:announceProvider";
export const REQUEST_EVENT = "eip6963:requestProvider";

/** The stand-in for `window.ethereum`, which says nothing about itself. */
export const INJECTED_WALLET: WalletInfo = { uuid: "injected", name: "Browser wallet", icon: null, rdns: "" };

const MAX_ICON_LENGTH = 256 * 1024;
const MAX_NAME_LENGTH = 48;

/** The icon if it is a data URI of an image (so an `<img>` can show it and nothing else), else null. */
export const safeIcon = (icon: unknown): string | null =>
  typeof icon === "string" &&
  icon.length <= MAX_ICON_LENGTH &&
  /^data:image\/[a-z0-9.+-]+(;[a-z0-9.+-]+(=[a-z0-9.+-]+)?)*,/i.test(icon)
    ? icon
    : null;

/** The name as one line of plain text, cut to a length a button can hold; null when there is none. */
export const safeName = (name: unknown): string | null => {
  if (typeof name !== "string") return null;
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it removes
  const text = name.replace(/[\u0000-\u001f\u007f\s]+/g, " ").trim();
  if (text === "") return null;
  return text.length > MAX_NAME_LENGTH ? `${text.slice(0, MAX_NAME_LENGTH - 1)}…` : text;
};

const isProvider = (value: unknown): value is Eip1193Provider =>
  typeof value === "object" &&
  value !== null &&
  typeof (value as { request?: unknown }).request === "function";

/** An announcement's detail as a wallet, or null when it is not a well-formed EIP-6963 announcement. */
export const announcedWallet = (detail: unknown): Wallet | null => {
  if (typeof detail !== "object" || detail === null) return null;
  const { info, provider } = detail as { info?: unknown; provider?: unknown };
  if (typeof info !== "object" || info === null || !isProvider(provider)) return null;
  const { uuid, name, icon, rdns } = info as Record<string, unknown>;
  const text = safeName(name);
  if (typeof uuid !== "string" || uuid === "" || text === null) return null;
  return {
    info: { uuid, name: text, icon: safeIcon(icon), rdns: typeof rdns === "string" ? rdns : "" },
    provider,
  };
};

/** Starts listening for wallets on `target` (the window) and asks them to announce themselves. */
export const discoverWallets = (target: WalletWindow): Wallets => {
  const announced = new Map<string, Wallet>();
  const listeners: Array<() => void> = [];
  target.addEventListener(ANNOUNCE_EVENT, (event) => {
    const wallet = announcedWallet((event as CustomEvent<unknown>).detail);
    if (wallet === null || announced.has(wallet.info.uuid)) return;
    announced.set(wallet.info.uuid, wallet);
    for (const listener of listeners) listener();
  });
  target.dispatchEvent(new Event(REQUEST_EVENT));
  return {
    list: () => {
      if (announced.size > 0) return [...announced.values()];
      // Looked up at each use: an extension may inject it after the page's scripts ran.
      const injected = target.ethereum;
      return isProvider(injected) ? [{ info: INJECTED_WALLET, provider: injected }] : [];
    },
    subscribe: (listener) => {
      listeners.push(listener);
    },
  };
};

/** The wallet chosen on an earlier visit, by rdns, for the tab's session (sessionStorage). */
export interface WalletMemory {
  get(): string | null;
  set(rdns: string): void;
}

const MEMORY_KEY = "hosted-page.wallet";

/** sessionStorage, or no memory where the browser refuses it (storage disabled, sandboxed frames). */
export const sessionMemory = (storage: () => Storage): WalletMemory => ({
  get: () => {
    try {
      return storage().getItem(MEMORY_KEY);
    } catch {
      return null;
    }
  },
  set: (rdns) => {
    try {
      storage().setItem(MEMORY_KEY, rdns);
    } catch {
      // Not remembered: the customer is asked again on the next page.
    }
  },
});
