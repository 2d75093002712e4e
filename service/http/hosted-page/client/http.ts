/** A hosted page's calls to its own origin (no API key): JSON in, JSON out, the one error shape. */

export class ApiError extends Error {
  readonly status: number;
  readonly code: string;
  constructor(status: number, code: string, message: string) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

const NETWORK_MESSAGE = "Couldn't reach the server. Check your connection and try again.";

/** GET `url` (no body) or POST `body` as JSON; a non-2xx answer throws its error as an ApiError. */
export const call = async <A>(url: string, body?: unknown): Promise<A> => {
  let response: Response;
  try {
    response = await fetch(
      url,
      body === undefined
        ? { headers: { accept: "application/json" }, cache: "no-store" }
        : {
            method: "POST",
            headers: { accept: "application/json", "content-type": "application/json" },
            body: JSON.stringify(body),
          },
    );
  } catch {
    throw new ApiError(0, "network_error", NETWORK_MESSAGE);
  }
  let json: unknown;
  try {
    json = await response.json();
  } catch {
    throw new ApiError(
      response.status,
      "invalid_response",
      `The server answered ${response.status} without JSON.`,
    );
  }
  if (!response.ok) {
    const error = (json as { error?: { code?: unknown; message?: unknown } } | null)?.error;
    throw new ApiError(
      response.status,
      typeof error?.code === "string" ? error.code : "unknown_error",
      typeof error?.message === "string" ? error.message : `The server answered ${response.status}.`,
    );
  }
  return json as A;
};
