/**
 * One embedded Postgres for the domain tests (no chain, no indexer): each test file makes a database of
 * its own on it (harness.ts). Started the way the stack starts it.
 */
import { join } from "node:path";
import type { TestProject } from "vitest/node";
import { startEmbeddedPostgres } from "../../scripts/stack/postgres.ts";
import { removeAbandonedScratchDirs, scratchDir } from "../../scripts/stack/scratch-stack.ts";
import { freePort } from "../../scripts/stack/wait.ts";

declare module "vitest" {
  export interface ProvidedContext {
    postgresUrl: string;
  }
}

export default async function setup(project: TestProject) {
  await removeAbandonedScratchDirs();
  const scratch = scratchDir("domain", []);
  const postgres = await startEmbeddedPostgres({
    dataDir: join(scratch.dataDir, "postgres"),
    port: await freePort(),
    database: "domain",
  });
  project.provide("postgresUrl", postgres.url);
  return async () => {
    await postgres.stop();
    scratch.remove();
  };
}
