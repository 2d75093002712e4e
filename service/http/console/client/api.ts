/**
 * The console's calls: its session (`/console/session`, the only non-/v1 endpoints) and the typed client
 * of /v1, the same one merchants use, so the console and the API cannot drift.
 */
import {
  type BillingClient,
  type components,
  createBillingClient,
  type ApiError as ErrorBody,
  type operations,
} from "../../../../client/index.ts";
import { ApiError } from "../../hosted-page/client/http.ts";

export { ApiError };

export type Schemas = components["schemas"];

type Query<Op extends keyof operations> = NonNullable<operations[Op]["parameters"]["query"]>;

/** The values a list operation's `status` filter takes, as the OpenAPI document types them. */
export type StatusFilter<Op extends keyof operations> = "status" extends keyof Query<Op>
  ? NonNullable<Query<Op>["status" & keyof Query<Op>]>
  : never;

/** Every value of `T`, checked by tsc: a list missing one, or naming an unknown one, does not compile. */
export const everyValue =
  <T extends string>() =>
  <const L extends readonly T[]>(list: L & (Exclude<T, L[number]> extends never ? unknown : never)): L =>
    list;

export interface Session {
  readonly livemode: boolean;
  readonly merchant: string;
  /** Signed in with a restricted key (`rk_…`): the console shows no control that changes anything. */
  readonly read_only: boolean;
  readonly csrf_token: string;
  readonly expires_at: number;
}

const errorOf = (status: number, body: unknown): ApiError => {
  const error = (body as Partial<ErrorBody> | null)?.error;
  return new ApiError(status, error?.code ?? "", error?.message ?? `The service answered ${status}.`);
};

const sessionCall = async (path: string, init: RequestInit = {}): Promise<Response> => {
  try {
    return await fetch(path, {
      ...init,
      credentials: "same-origin",
      headers: { accept: "application/json", ...init.headers },
    });
  } catch {
    throw new ApiError(0, "", "The service could not be reached: check your connection and try again.");
  }
};

/** The session of the browser's cookie, or null when signed out. */
export const readSession = async (): Promise<Session | null> => {
  const response = await sessionCall("/console/session");
  if (response.status === 401) return null;
  const body: unknown = await response.json().catch(() => null);
  if (!response.ok) throw errorOf(response.status, body);
  return body as Session;
};

export const signIn = async (apiKey: string): Promise<Session> => {
  const response = await sessionCall("/console/session", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ api_key: apiKey }),
  });
  const body: unknown = await response.json().catch(() => null);
  if (!response.ok) throw errorOf(response.status, body);
  return body as Session;
};

export const signOut = async (session: Session): Promise<void> => {
  const response = await sessionCall("/console/session/end", {
    method: "POST",
    headers: { "content-type": "application/json", "x-csrf-token": session.csrf_token },
    body: "{}",
  });
  if (!response.ok && response.status !== 401)
    throw errorOf(response.status, await response.json().catch(() => null));
};

export const billingClient = (session: Session): BillingClient =>
  createBillingClient({ baseUrl: "", csrfToken: session.csrf_token });

/** The data of a typed-client answer, or its error as an ApiError (the API's own message). */
export const unwrap = async <T>(
  request: Promise<{ data?: T; error?: ErrorBody; response: Response }>,
): Promise<T> => {
  let answer: Awaited<typeof request>;
  try {
    answer = await request;
  } catch {
    throw new ApiError(0, "", "The service could not be reached: check your connection and try again.");
  }
  if (answer.error !== undefined || answer.data === undefined)
    throw errorOf(answer.response.status, answer.error ?? null);
  return answer.data;
};
