/**
 * The one story the reference's examples tell, in test mode on the local chain `npm start` runs (where the
 * test helpers work) with its test USDC: a merchant, a customer, their mandate, a charge, a payment, a
 * subscription and a webhook endpoint. Ids have the real shape (prefix, 26 Crockford base32 characters)
 * and the objects refer to each other.
 */

export const CHAIN = { id: 31337, name: "Local chain (anvil)" } as const;
export const USDC = {
  symbol: "USDC",
  address: "0x5FbDB2315678afecb367f032d93F642f64180aa3",
  decimals: 6,
} as const;
export const ESCROW = "0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512";
export const PAYOUT_ADDRESS = "0x8Ba1f109551bD432803012645Ac136ddd64DBA72";
export const CUSTOMER_ADDRESS = "0x2546BcD3c84621e976D8185a91A922aE77ECEc30";
export const DEPOSIT_ADDRESS = "0x9fE46736679d2D9a65F0992F2272dE9f3c7fa6e0";
export const HOLD_SECONDS = 604_800;
export const PUBLIC_URL = "http://127.0.0.1:4242";

export const IDS = {
  merchantChain: "mch_01KJQ0PH50VJ7JV8RCXKAPVQCP",
  webhookEndpoint: "we_01KJQ0PTXGR57H2R22PV9JA4NN",
  price: "price_01KJQ0QEEGD0XN67T1XJ4A5WT5",
  upgradePrice: "price_01KJQB2M40S7Y3XW9RKD5T8QEV",
  coupon: "cpn_01KJQ0QR70E8R9R1564N1R8RS2",
  mandate: "mdt_01KJQ0RBR0V5CVCE367YD7VSK3",
  payment: "pay_01KJQ0T6B00G7ZTP95TG713HKV",
  subscription: "sub_01KJQ0W0Y0N3X7ZNG8JD0HMJCG",
  invoice: "inv_01KJQ0WMF0ABBE7QJFM3EC56A6",
  subscriptionMandate: "mdt_01KJQ0ZP40PWDG2E2D615AF25J",
  charge: "ch_01KJQ44CS0JX48ZENK50GPCWWA",
  invoiceCharge: "ch_01KJQ7J8D03FXNEMHA94RGC2QB",
  event: "evt_01KJQ47EE0Q3GZG2YQ1BG7GK3R",
  delivery: "whd_01KJQ47FD89TDW6YDATV52AZ59",
  usageRecord: "ur_01KJQ9967030XG55D3CH7RR2ZT",
  testEvent: "evt_01KJQ9C7W040PRYGDT11SH4RR6",
  testDelivery: "whd_01KJQ9F9H0MTVZ5W08D97M3D83",
  replayedDelivery: "whd_01KJQ9K2V8B5R7M4X2N6P3Q8TC",
  chargeBalanceTransaction: "txn_01KJQ44DA0T2W8PZ4M6K9R3BXD",
} as const;

/** Unix seconds: 2 March 2026, 10:15 UTC, when the merchant configured the chain. */
export const T0 = 1_772_446_500;
export const at = (secondsAfterT0: number) => T0 + secondsAfterT0;

export const HASHES = {
  mandateOnchainId: "0x2546bcd3c84621e976d8185a91a922ae77ecec305c1e0000000000000000a3f1",
  chargeOnchainId: "0xd1d022aca00f78040a06d3785518e2a0ab02d4a3f2e9cd4dbadbb88fbaad89cb",
  chargeTransaction: "0xae9bab13865a42e6d6d6cf772e882b56a9f8315ae0542479d54d4589319c3c41",
  chargeBlock: "0xaadcc3085f7fc1d7c44d0a8c8036ba16c5fc5f72d55bdf7381a0715655f70b20",
  paymentTransfer: "0x8661f600ac3c890333c41ed7dd0f741cd38997e7f8d17c695fea6b2ac24da1ef",
  sweepTransaction: "0x44c5695a0fc54676ffacced446a2a1546cc011def2eca47bb7b22b52b8745267",
  sweepBlock: "0xe829baf724884c15559694194687e87d0986ea9dced2dec8baff29790d1fe307",
  fundTransaction: "0x1c4779f68f62265fc82d0879bd35a3de3dad911eac0e29c7371ac9b32a25a9f4",
  testPayTransaction: "0x9a96658a39e488c922a9af4edd89dd1fbf4d7f47eac88a1bc26f4ab3f0207c1f",
} as const;

export const CHARGE_BLOCK = 1843;
export const TRANSFER_BLOCK = 1790;

/** A list response of one page. */
export const page = <A>(...data: ReadonlyArray<A>) => ({ object: "list" as const, data, has_more: false });
