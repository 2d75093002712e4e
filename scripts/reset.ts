/** `npm run reset`: deletes the local stack's data (database, chain state, keys). Refuses while it runs. */
import { existsSync, rmSync } from "node:fs";
import { join } from "node:path";
import { removePostgresData } from "./stack/postgres-paths.ts";

const dataDir = process.env.DATA_DIR ?? ".data";
if (existsSync(join(dataDir, "stack.json")) && existsSync(join(dataDir, "postgres", "postmaster.pid"))) {
  console.error(
    `The local stack looks like it is running (${dataDir}/stack.json). Stop it with Ctrl-C first.`,
  );
  process.exit(1);
}
// As root the database lives outside the checkout, linked from <dataDir>/postgres.
const outside = removePostgresData(join(dataDir, "postgres"));
rmSync(dataDir, { recursive: true, force: true });
console.log(
  `Removed ${dataDir}/${outside ? ` and ${outside}/` : ""}: the next npm start begins with an empty database and a fresh local chain.`,
);
