/** A database of its own on the stack's Postgres, for tests whose workers must not meet the stack's. */
import { randomUUID } from "node:crypto";
import { query, stack } from "./helpers.ts";

export const freshDatabase = async (prefix: string): Promise<string> => {
  const name = `${prefix}_${randomUUID().replaceAll("-", "").slice(0, 12)}`;
  await query(`CREATE DATABASE ${name}`);
  const url = new URL(stack().databaseUrl);
  url.pathname = `/${name}`;
  return url.toString();
};
