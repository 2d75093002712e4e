/**
 * `npm run client:generate`: writes client/openapi.ts from the OpenAPI document the service serves,
 * built here from the same route table (no stack needed).
 */
import { writeFileSync } from "node:fs";
import { buildOpenApi } from "../../service/http/openapi.ts";
import { routes, VERSION } from "../../service/main.ts";
import { CLIENT_TYPES_PATH, clientTypes } from "./client-types.ts";

writeFileSync(CLIENT_TYPES_PATH, await clientTypes(buildOpenApi(routes, { version: VERSION })));
console.log(`wrote ${CLIENT_TYPES_PATH}`);
