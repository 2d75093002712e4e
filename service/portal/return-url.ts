/**
 * A portal session's `return_url`: where the page's Return link leads. An absolute https URL; in test
 * mode also http to a loopback address (a merchant's site running locally). No credentials, no spaces
 * or control characters; stored as the URL parser normalises it.
 */
import { Effect } from "effect";
import { type InvalidRequest, invalidParam } from "../errors.ts";

const MAX_LENGTH = 2048;

const isLoopback = (hostname: string) =>
  hostname === "localhost" || hostname === "[::1]" || /^127\.\d+\.\d+\.\d+$/.test(hostname);

export const checkReturnUrl = (raw: string, livemode: boolean): Effect.Effect<string, InvalidRequest> => {
  const refuse = (message: string, code: "url_invalid" | "url_insecure" = "url_invalid") =>
    Effect.fail(invalidParam("return_url", message, code));
  if (raw.length > MAX_LENGTH) return refuse(`return_url is at most ${MAX_LENGTH} characters.`);
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what this looks for
  if (/[\s\u0000-\u001f\u007f]/.test(raw))
    return refuse("return_url must not contain spaces or control characters.");
  if (!URL.canParse(raw))
    return refuse("return_url is not an absolute URL: give the full https://… address.");
  const url = new URL(raw);
  if (url.protocol !== "https:" && url.protocol !== "http:")
    return refuse(`return_url must use https, not ${url.protocol.slice(0, 20)}.`);
  if (url.username !== "" || url.password !== "") return refuse("return_url must not carry credentials.");
  if (url.hostname === "") return refuse("return_url has no host.");
  if (url.protocol === "http:" && (livemode || !isLoopback(url.hostname)))
    return refuse(
      "return_url must use https (http only to a loopback address, in test mode).",
      "url_insecure",
    );
  return Effect.succeed(url.href);
};
