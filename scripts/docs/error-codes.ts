/**
 * docs/errors.md from the catalogue (service/error-codes.ts): `npm run docs` writes it, and
 * test/unit/docs-coverage.test.ts fails when the committed file differs.
 */
import { writeFileSync } from "node:fs";
import { ERROR_CODES } from "../../service/error-codes.ts";

export const ERRORS_DOC = "docs/errors.md";

const statusText = (status: number | readonly number[]) =>
  typeof status === "number" ? String(status) : status.join(", ");

export const renderErrorsDoc = (): string => {
  const rows = Object.entries(ERROR_CODES).map(
    ([code, entry]) => `| \`${code}\` | ${statusText(entry.status)} | ${entry.when} |`,
  );
  return `# Error codes

Every error answers one shape, \`{"error":{"type","code","message","param"}}\` (docs/api-conventions.md):
\`type\` is \`invalid_request_error\` (4xx the caller can fix), \`authentication_error\` (401),
\`idempotency_error\` (\`Idempotency-Key\` misuse) or \`api_error\` (503 and 500: retry later, nothing
changed); \`param\` names the parameter at fault, when there is one. Branch on \`code\`: it is stable, the
message is for people. This table is generated from \`service/error-codes.ts\` (\`npm run docs\`).

| code | status | when |
| --- | --- | --- |
${rows.join("\n")}
`;
};

if (import.meta.main) {
  writeFileSync(ERRORS_DOC, renderErrorsDoc());
  console.log(`wrote ${ERRORS_DOC}`);
}
