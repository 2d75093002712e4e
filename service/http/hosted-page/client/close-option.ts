/**
 * `?close=1` closes the tab once the page is done (everything signed; the payment paid), after a
 * countdown of `delay` seconds: a whole number from 0 to 60; anything else (missing, empty, negative,
 * fractional, over 60) means 5. The same on both hosted pages.
 */
export const DEFAULT_CLOSE_DELAY_SECONDS = 5;
export const MAX_CLOSE_DELAY_SECONDS = 60;

/** The countdown in seconds, or null when the page stays open. */
export const closeDelayFromQuery = (search: string): number | null => {
  const params = new URLSearchParams(search);
  if (params.get("close") !== "1") return null;
  const delay = params.get("delay");
  if (delay === null || !/^\d{1,2}$/.test(delay)) return DEFAULT_CLOSE_DELAY_SECONDS;
  const seconds = Number(delay);
  return seconds <= MAX_CLOSE_DELAY_SECONDS ? seconds : DEFAULT_CLOSE_DELAY_SECONDS;
};
