/**
 * API request rates that no benchmark and no test reaches with its one key: the limiter still counts
 * every request (its leases, the `RateLimit-*` headers) and refuses none. Scratch stacks (benchmarks,
 * tests that start their own) and the test suite's stack run with them, and so does every service
 * process a test starts (vitest.config.ts puts them in the e2e tests' environment). A test of the limits
 * themselves starts a process of its own with low ones. Open payments keep the service's default.
 */
export const UNREACHED_REQUEST_RATES = {
  livePerSecond: 1_000_000,
  testPerSecond: 1_000_000,
  testHelpersPerSecond: 1_000_000,
} as const;

/** The same as environment variables, for service processes started as children. */
export const UNREACHED_REQUEST_RATES_ENV = {
  API_RATE_LIMIT_LIVE: String(UNREACHED_REQUEST_RATES.livePerSecond),
  API_RATE_LIMIT_TEST: String(UNREACHED_REQUEST_RATES.testPerSecond),
  API_RATE_LIMIT_TEST_HELPERS: String(UNREACHED_REQUEST_RATES.testHelpersPerSecond),
} as const;
