/**
 * The money movements of a merchant's balance, pure: what each confirmed chain fact the relay applies
 * moves, as double-entry legs between the merchant's accounts on one chain and token. Every movement's
 * legs sum to zero; a reorg's undoing is a reversal (the legs negated), never a deletion.
 *
 * | account     | holds                                                               |
 * |-------------|---------------------------------------------------------------------|
 * | `customer`  | outside money: what customers paid in (negative: money came from it) |
 * | `pending`   | money held in escrow for the merchant (a charge's or a payment's hold) |
 * | `available` | money that reached the merchant's payout address                    |
 * | `returned`  | money sent back to customers from a hold                            |
 *
 * | fact                                  | type              | legs                  | balance_effect | amount |
 * |---------------------------------------|-------------------|-----------------------|----------------|--------|
 * | charge.succeeded, held                | `charge`          | customer → pending    | pending        | +a     |
 * | charge.succeeded, unheld              | `charge`          | customer → available  | available      | +a     |
 * | payment.received, into the hold       | `payment`         | customer → pending    | pending        | +a     |
 * | payment.received, straight            | `payment`         | customer → available  | available      | +a     |
 * | charge.released / payment.released    | `release` / `payment_release` | pending → available | available | +a |
 * | charge.returned / payment.returned    | `return` / `payment_return`   | pending → returned  | returned  | −a |
 *
 * `amount` is what the movement does to the merchant, signed: money in (+), money back to a customer
 * (−); a release moves money the merchant already had from pending to available (+a into available).
 */

export const ACCOUNTS = ["customer", "pending", "available", "returned"] as const;
export type Account = (typeof ACCOUNTS)[number];

export const MOVEMENT_TYPES = [
  "charge",
  "payment",
  "release",
  "payment_release",
  "return",
  "payment_return",
] as const;
export type MovementType = (typeof MOVEMENT_TYPES)[number];

export type BalanceEffect = "pending" | "available" | "returned";

export interface Leg {
  readonly account: Account;
  readonly amount: bigint;
}

export interface Movement {
  readonly type: MovementType;
  readonly balanceEffect: BalanceEffect;
  /** Signed, as the merchant sees it: + money in or made available, − money returned. */
  readonly amount: bigint;
  readonly legs: readonly [Leg, Leg];
  /** A reorg's undoing of an earlier movement: its legs negated. */
  readonly reversal: boolean;
}

/** The facts that move money, with what decides where it goes. */
export type MoneyFact =
  | {
      readonly kind: "charge.succeeded" | "payment.received";
      readonly amount: bigint;
      readonly held: boolean;
    }
  | {
      readonly kind: "charge.released" | "charge.returned" | "payment.released" | "payment.returned";
      readonly amount: bigint;
    };

const move = (
  type: MovementType,
  from: Account,
  to: Account,
  amount: bigint,
  balanceEffect: BalanceEffect,
  signed: bigint,
): Movement => ({
  type,
  balanceEffect,
  amount: signed,
  legs: [
    { account: from, amount: -amount },
    { account: to, amount },
  ],
  reversal: false,
});

export const movementOf = (fact: MoneyFact): Movement => {
  const a = fact.amount;
  switch (fact.kind) {
    case "charge.succeeded":
    case "payment.received": {
      const type = fact.kind === "charge.succeeded" ? "charge" : "payment";
      return fact.held
        ? move(type, "customer", "pending", a, "pending", a)
        : move(type, "customer", "available", a, "available", a);
    }
    case "charge.released":
      return move("release", "pending", "available", a, "available", a);
    case "payment.released":
      return move("payment_release", "pending", "available", a, "available", a);
    case "charge.returned":
      return move("return", "pending", "returned", a, "returned", -a);
    case "payment.returned":
      return move("payment_return", "pending", "returned", a, "returned", -a);
  }
};

/** The undoing of `movement` (its block left the chain): every leg and the amount negated. */
export const reversalOf = (movement: Movement): Movement => ({
  ...movement,
  amount: -movement.amount,
  legs: [
    { account: movement.legs[0].account, amount: -movement.legs[0].amount },
    { account: movement.legs[1].account, amount: -movement.legs[1].amount },
  ],
  reversal: !movement.reversal,
});

export type Balances = Readonly<Record<Account, bigint>>;

export const ZERO: Balances = { customer: 0n, pending: 0n, available: 0n, returned: 0n };

/** The accounts after `movements`, each the sum of its legs. */
export const balancesAfter = (movements: Iterable<Movement>, start: Balances = ZERO): Balances => {
  const totals = { ...start };
  for (const movement of movements) for (const leg of movement.legs) totals[leg.account] += leg.amount;
  return totals;
};
