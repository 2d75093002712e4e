/**
 * The chain boundary: a viem/Ponder-decoded escrow event (name, args, position) becomes a ledger log,
 * checked by schema. Addresses and hashes are lower-cased so equal values compare equal.
 */
import { Result, type Schema } from "effect";
import { decodeEscrowLog, type EscrowLog, type LogPosition } from "./types.ts";

const ESCROW_EVENTS = [
  "MandateAuthorized",
  "MandateRevoked",
  "RelayerSet",
  "CapLowered",
  "Charged",
  "Released",
  "Returned",
  "PaymentReceived",
  "PaymentReleased",
  "PaymentReturned",
] as const;
export type EscrowEventName = (typeof ESCROW_EVENTS)[number];

const normalise = (value: unknown): unknown => {
  if (typeof value === "string" && value.startsWith("0x")) return value.toLowerCase();
  if (typeof value === "bigint") return value;
  return value;
};

/** Fields the ledger keeps as numbers (times, periods, counts); the rest stay bigint. */
const NUMERIC = new Set(["anchor", "approvalPeriods", "holdSeconds", "period", "releaseAt"]);

export const toEscrowLog = (
  eventName: string,
  args: Readonly<Record<string, unknown>>,
  at: LogPosition,
): Result.Result<EscrowLog, Schema.SchemaError | string> => {
  if (!(ESCROW_EVENTS as readonly string[]).includes(eventName))
    return Result.fail(`not an escrow event: ${eventName}`);
  const fields = Object.fromEntries(
    Object.entries(args).map(([name, value]) => [
      name,
      NUMERIC.has(name) && typeof value === "bigint" ? Number(value) : normalise(value),
    ]),
  );
  return decodeEscrowLog({
    kind: eventName,
    at: { ...at, blockHash: at.blockHash.toLowerCase(), txHash: at.txHash.toLowerCase() },
    ...fields,
  });
};
