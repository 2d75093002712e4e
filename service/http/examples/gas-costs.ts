/** Examples of gas costs: the charge of the story, charged in a batch of three on the local chain. */
import type { GasCostObject, GasCostTotalObject } from "../../chains/gas-cost-object.ts";
import { at, CHAIN, HASHES, IDS } from "./shared.ts";

export const chargeGasCost: GasCostObject = {
  id: "gc_01KJQ44DA0R3W8ZT6N2M5C7XHB",
  object: "gas_cost",
  livemode: false,
  created: at(3607),
  chain: CHAIN.id,
  native_currency: "ETH",
  amount_wei: "43251667000000",
  kind: "charge",
  source: IDS.charge,
  source_type: "charge",
  transaction: {
    hash: HASHES.chargeTransaction,
    block_number: 1843,
    status: "mined",
    gas_used: "129755",
    effective_gas_price: "1000000000",
    l1_fee_wei: "0",
    total_wei: "129755000000000",
    objects: 3,
  },
};

export const monthlyGasTotal: GasCostTotalObject = {
  object: "gas_cost_total",
  livemode: false,
  month: "2026-03",
  chain: CHAIN.id,
  native_currency: "ETH",
  amount_wei: "612840000000000",
  count: 9,
};
