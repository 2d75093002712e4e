import { PgClient } from "@effect/sql-pg";
import { Redacted } from "effect";

/** The service's own tables live in this Postgres schema. */
export const BILLING_SCHEMA = "billing";

/**
 * Ponder writes chain truth into a schema named per build and publishes it as views in this
 * stable schema; the service reads chain tables only from here.
 */
export const ONCHAIN_SCHEMA = "onchain";

/** Postgres: the one store. numeric/int8 columns come back as strings and are decoded by each repository. */
export const databaseLayer = (url: string, maxConnections = 20) =>
  PgClient.layer({
    url: Redacted.make(url),
    maxConnections,
    applicationName: "mandate-billing",
    connectTimeout: "5 seconds",
  });
