/** What every signed-in page gets from the shell. */
import type { BillingClient } from "../../../../client/index.ts";

export interface PageProps {
  readonly client: BillingClient;
  /** Puts a result in the shell's status region. */
  readonly announce: (message: string) => void;
  /** Shows an error's message in the status region (and signs out locally when the session ended). */
  readonly fail: (error: unknown) => void;
}
