import { defineConfig } from "vitest/config";
import { UNREACHED_REQUEST_RATES_ENV } from "./scripts/stack/unreached-limits.ts";

export default defineConfig({
  test: {
    projects: [
      {
        test: {
          name: "unit",
          include: ["test/unit/**/*.test.ts"],
          testTimeout: 60_000,
        },
      },
      {
        test: {
          name: "contract",
          include: ["test/contract/**/*.test.ts"],
          testTimeout: 600_000,
          hookTimeout: 60_000,
        },
      },
      {
        test: {
          name: "domain",
          include: ["test/domain/**/*.test.ts"],
          globalSetup: ["test/domain/global-setup.ts"],
          testTimeout: 60_000,
          hookTimeout: 60_000,
        },
      },
      {
        test: {
          name: "e2e",
          include: ["test/e2e/**/*.test.ts"],
          globalSetup: ["test/e2e/global-setup.ts"],
          testTimeout: 120_000,
          hookTimeout: 180_000,
          // `expect.poll` waits for something to happen (a page's answer, a row): a budget for a positive
          // event, generous so a loaded machine is slow, not failing. A claim that something did not
          // happen never rests on it (test/e2e/settle.ts).
          expect: { poll: { timeout: 30_000 } },
          // One real stack per run, shared by the files; they create their own merchants and keys.
          fileParallelism: false,
          // Service processes the tests start take this environment: request rates the suite never reaches.
          env: UNREACHED_REQUEST_RATES_ENV,
        },
      },
    ],
  },
});
