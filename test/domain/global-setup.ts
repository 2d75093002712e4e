/**
 * One embedded Postgres for the domain tests (no chain, no indexer): each test file makes a database of
 * its own on it (harness.ts). Started the way the stack starts it.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { TestProject } from "vitest/node";
import { startEmbeddedPostgres } from "../../scripts/stack/postgres.ts";
import { removePostgresData } from "../../scripts/stack/postgres-paths.ts";
import { freePort } from "../../scripts/stack/wait.ts";

declare module "vitest" {
  export interface ProvidedContext {
    postgresUrl: string;
  }
}

export default async function setup(project: TestProject) {
  const dataDir = mkdtempSync(join(tmpdir(), "billing-domain-"));
  const postgres = await startEmbeddedPostgres({
    dataDir: join(dataDir, "postgres"),
    port: await freePort(),
    database: "domain",
  });
  project.provide("postgresUrl", postgres.url);
  return async () => {
    await postgres.stop();
    removePostgresData(join(dataDir, "postgres"));
    rmSync(dataDir, { recursive: true, force: true });
  };
}
