/**
 * Ponder requires an HTTP entry here. The merchant API is the separate service process
 * (service/main.ts); this only exposes Ponder's read-only SQL endpoint for operators' tools.
 */
import { db } from "ponder:api";
import schema from "ponder:schema";
import { Hono } from "hono";
import { client } from "ponder";

const app = new Hono();
app.use("/sql/*", client({ db, schema }));
export default app;
