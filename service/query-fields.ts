/** Query-string fields several lists share: whole numbers, unix seconds, chain ids. */
import { Schema } from "effect";

export const Natural = Schema.FiniteFromString.check(Schema.isInt(), Schema.isGreaterThanOrEqualTo(0));
/** Up to the end of year 9999, Postgres' and JavaScript's common range of times. */
export const UnixSeconds = Natural.check(Schema.isLessThanOrEqualTo(253_402_300_799));
export const ChainId = Natural.check(Schema.isLessThanOrEqualTo(Number.MAX_SAFE_INTEGER));
