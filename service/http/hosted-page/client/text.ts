/** Plain-words helpers both hosted pages use; pure. */

export const plural = (count: number, unit: string) => `${count} ${unit}${count === 1 ? "" : "s"}`;

/** 0x1234…abcd */
export const shortAddress = (address: string) =>
  address.length > 12 ? `${address.slice(0, 6)}…${address.slice(-4)}` : address;

export const sameAddress = (a: string | null, b: string | null) =>
  a !== null && b !== null && a.toLowerCase() === b.toLowerCase();

/** The `?close=1` countdown's line: null while the page stays open. */
export const closingText = (seconds: number | null, closeFailed: boolean): string | null =>
  seconds === null
    ? closeFailed
      ? "You can close this tab now."
      : null
    : seconds === 0
      ? "Closing this tab…"
      : `This tab will close in ${plural(seconds, "second")}.`;
