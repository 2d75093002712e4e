/**
 * No test waits a fixed time and then asserts: a claim that something did not happen (yet, or again)
 * rests on a settle point the system reports (test/e2e/settle.ts, lock waits seen in Postgres, the
 * event loop's order), never on a pause that is long enough on a quiet machine. This scans test/ for
 * sleeps and fails on any outside the allow-list, where each use says why it is not such a wait; an
 * entry whose use is gone fails too, so the list stays true.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = join(import.meta.dirname, "..", "..");
const SELF = "test/unit/no-sleeps.test.ts";

const PATTERNS: ReadonlyArray<{ readonly name: string; readonly regex: RegExp }> = [
  { name: "setTimeout", regex: /\bsetTimeout\s*\(/ },
  { name: "setInterval", regex: /\bsetInterval\s*\(/ },
  // sleep(…), Effect.sleep(…), clock.sleep(…)
  { name: "sleep", regex: /(?<![\w$])sleep\s*\(/ },
  { name: "Effect.delay", regex: /\bEffect\.delay\s*\(/ },
  { name: "pg_sleep", regex: /\bpg_sleep/ },
  { name: "timers/promises", regex: /["'](node:)?timers\/promises["']/ },
  // Playwright's page.waitForTimeout(…)
  { name: "waitForTimeout", regex: /\bwaitForTimeout\s*\(/ },
];

interface Finding {
  readonly file: string;
  readonly line: number;
  readonly text: string;
  readonly pattern: string;
}

/** Every line of `text` that sleeps, by pattern. */
const findSleeps = (file: string, text: string): Finding[] =>
  text.split("\n").flatMap((line, index) =>
    PATTERNS.filter((pattern) => pattern.regex.test(line)).map((pattern) => ({
      file,
      line: index + 1,
      text: line.trim(),
      pattern: pattern.name,
    })),
  );

/** Uses that are not a wait before an assertion: the file, a piece of the line, and why. */
const ALLOWED: ReadonlyArray<{ readonly file: string; readonly contains: string; readonly reason: string }> =
  [
    {
      file: "test/contract/harness.ts",
      contains: "setTimeout(resolve, 5)",
      reason:
        "polls for a receipt (a positive condition, with its own deadline); viem's wait hung on automining anvil",
    },
    {
      file: "test/e2e/faults.test.ts",
      contains: "frozenUntil - Date.now()",
      reason:
        "keeps the RPC frozen for the fault's stated 30 s; nothing is asserted about what did not happen meanwhile",
    },
    {
      file: "test/e2e/subscription-chain-closing.test.ts",
      contains: "setInterval(() => void chain.mine(1)",
      reason: "keeps blocks coming so that the 2-confirmation chain confirms what the test waits for",
    },
    {
      file: "test/e2e/indexer-watchdog.test.ts",
      contains: "await sleep(1000)",
      reason:
        "the chain moving on at a block a second while the indexer is frozen: the stall the watchdog must see",
    },
    {
      file: "test/unit/rpc-transport.test.ts",
      contains: "setTimeout(resolve, node.delayMs)",
      reason:
        "a JSON-RPC node that answers slowly (a provider's latency spike): the server's side, not a wait",
    },
    {
      file: "test/e2e/browser-wallet.ts",
      contains: "setTimeout(start, entry.delayMs)",
      reason: "a wallet extension that announces itself late (EIP-6963), as real ones do",
    },
    {
      file: "test/e2e/console-driver.ts",
      contains: "setTimeout(() => page.readsDone?.push(url), 0)",
      reason:
        "runs in the page: records an answer in a task queued after the page's own handlers of it (the event loop's order), not a wait",
    },
    {
      file: "test/e2e/receiver.ts",
      contains: "setTimeout(send, reply.delayMs)",
      reason: "a webhook receiver that answers slowly",
    },
    {
      file: "test/e2e/webhook-retries.test.ts",
      contains: "sleep: (duration) => base.sleep(duration)",
      reason: "a Clock whose wall time the test sets passes sleeping through to the real clock",
    },
    {
      file: "test/e2e/hostile-merchant.test.ts",
      contains: 'await sleep(Number(answer.headers.get("retry-after")',
      reason:
        "an honest merchant's client waiting out a 429's Retry-After before asking again, as Stripe's libraries do; nothing is asserted meanwhile",
    },
    {
      file: "test/e2e/hostile-attack.ts",
      contains: "setTimeout(resolve, Math.max(0, started + (i * 1000) / perSecond - Date.now())",
      reason:
        "an attacker's load generator pacing its requests at a stated rate; nothing is asserted meanwhile",
    },
    {
      file: "test/e2e/hostile-merchant.test.ts",
      contains: "await sleep(50);",
      reason:
        "samples when each block is first seen mined and indexed, for the printed stages; nothing is asserted from it",
    },
    {
      file: "test/domain/relayer-spending.test.ts",
      contains: "sleep: (duration) => clock.sleep(duration)",
      reason: "a Clock whose wall time the test sets passes sleeping through to the real clock",
    },
  ];

const unexcused = (findings: ReadonlyArray<Finding>) =>
  findings.filter((f) => !ALLOWED.some((a) => a.file === f.file && f.text.includes(a.contains)));

const testFiles = (dir: string): string[] =>
  readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return testFiles(path);
    return /\.(ts|tsx|js|mjs)$/.test(entry.name) ? [relative(ROOT, path)] : [];
  });

describe("sleeps in test/", () => {
  const findings = testFiles(join(ROOT, "test"))
    .filter((file) => file !== SELF)
    .flatMap((file) => findSleeps(file, readFileSync(join(ROOT, file), "utf8")));

  it("has none outside the allow-list, each of which gives its reason", () => {
    expect(unexcused(findings)).toEqual([]);
    for (const allowed of ALLOWED) expect(allowed.reason.length).toBeGreaterThan(20);
  });

  it("has every allow-list entry still in use", () => {
    const stale = ALLOWED.filter(
      (a) => !findings.some((f) => f.file === a.file && f.text.includes(a.contains)),
    );
    expect(stale).toEqual([]);
  });

  it("catches a planted sleep before an assertion, in each form, and passes settle points", () => {
    const planted = [
      "await new Promise((resolve) => setTimeout(resolve, 1500));",
      'yield* Effect.sleep("200 millis");',
      "await sleep(500);",
      'await query("SELECT pg_advisory_xact_lock(1), pg_sleep(2)");',
      'import { setTimeout as wait } from "node:timers/promises";',
      "const timer = setInterval(poll, 100);",
      'yield* Effect.delay(check, "1 second");',
      "await page.waitForTimeout(500);",
      "expect(await eventsFor(mandateId)).toHaveLength(2);",
    ].join("\n");
    const found = unexcused(findSleeps("test/e2e/planted.test.ts", planted));
    expect(found.map((f) => [f.line, f.pattern])).toEqual([
      [1, "setTimeout"],
      [2, "sleep"],
      [3, "sleep"],
      [4, "pg_sleep"],
      [5, "timers/promises"],
      [6, "setInterval"],
      [7, "Effect.delay"],
      [8, "waitForTimeout"],
    ]);
    // An allowed line is allowed only in its own file.
    expect(unexcused(findSleeps("test/e2e/other.test.ts", "      await sleep(1000);"))).toHaveLength(1);
    const settled = [
      "await relaySettled(31337);",
      "await deliveriesSettled(m.key, [endpoint.id]);",
      "yield* lockWaits(1);",
      "await new Promise<void>((resolve) => setImmediate(resolve));",
      "const asleep = isAsleep(worker);",
    ].join("\n");
    expect(findSleeps("test/e2e/planted.test.ts", settled)).toEqual([]);
  });
});
