/** Whose objects a domain operation sees and writes: one merchant, in one mode (test or live). */
export interface MerchantScope {
  readonly merchantId: string;
  readonly livemode: boolean;
}
