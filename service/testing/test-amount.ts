import { Effect, Result } from "effect";
import { InvalidRequest } from "../errors.ts";
import { parseDecimal } from "../money/decimal.ts";

/** A test helper's `amount_decimal` in base units: any positive amount a test token can hold. */
export const testAmount = (amountDecimal: string, decimals: number) => {
  const amount = parseDecimal(amountDecimal, decimals, 2n ** 128n - 1n);
  return Result.isFailure(amount)
    ? Effect.fail(
        new InvalidRequest({
          code: "parameter_invalid",
          message: `amount_decimal ${amount.failure.message}.`,
          param: "amount_decimal",
        }),
      )
    : Effect.succeed(amount.success);
};
