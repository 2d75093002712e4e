/**
 * The relayer's advisory locks, taken inside a submission's database transaction. A submission holds
 * its account's lock shared (submissions run side by side; only the tracker's gap filling takes it
 * exclusively, waiting for every submission in flight) and its purpose and action exclusively (the same
 * purpose submitted twice at once yields one transaction).
 */
import { Effect } from "effect";
import type { SqlClient } from "effect/sql";

const accountKey = (chainId: number, from: string) => `relayer:${chainId}:${from}`;
const purposeKey = (chainId: number, purpose: string) => `relayer-purpose:${chainId}:${purpose}`;
const actionKey = (chainId: number, action: string) => `relayer-action:${chainId}:${action}`;

export const relayerLocks = (sql: SqlClient.SqlClient) => {
  /**
   * The account's lock shared, then `keys` exclusively in the order of their lock ids (`hashtext`), the
   * same order for every holder: a lone submission and a group, or two groups, sharing keys wait for
   * each other instead of deadlocking, also when two keys' ids collide (ordered by their text, the
   * locks would follow another order than the ids' whenever two collided, and a lone submission took its
   * purpose before its action where a group took the action first).
   */
  const holdKeys = (chainId: number, from: string, keys: ReadonlyArray<string>) =>
    Effect.asVoid(
      Effect.andThen(
        sql`SELECT pg_advisory_xact_lock_shared(hashtext(${accountKey(chainId, from)}))`,
        sql`SELECT pg_advisory_xact_lock(id)
          FROM (SELECT DISTINCT hashtext(k) AS id FROM unnest(${[...keys]}::text[]) AS k ORDER BY id) AS ids`,
      ),
    );
  return {
    /**
     * Waits until no submission of the account on the chain is in flight, and keeps new ones out until
     * the transaction ends: every nonce taken is then either recorded or lost to a rollback.
     */
    lockAccount: (chainId: number, from: string) =>
      Effect.asVoid(sql`SELECT pg_advisory_xact_lock(hashtext(${accountKey(chainId, from)}))`),
    /** A submission's locks, held until its transaction ends. */
    holdSubmission: (chainId: number, from: string, purpose: string, action: string | null) =>
      holdKeys(chainId, from, [
        purposeKey(chainId, purpose),
        ...(action === null ? [] : [actionKey(chainId, action)]),
      ]),
    /** A group's `holdSubmission`: the account's lock shared, every item's purpose and action exclusively. */
    holdItems: (chainId: number, from: string, items: ReadonlyArray<{ purpose: string; action: string }>) =>
      holdKeys(
        chainId,
        from,
        items.flatMap((item) => [purposeKey(chainId, item.purpose), actionKey(chainId, item.action)]),
      ),
  };
};
