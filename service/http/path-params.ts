/** What each route's path params must look like, with the answer the route gives for an unknown one. */
import { notFoundCharge } from "../charges/charges.ts";
import { notFoundEvent } from "../events/events.ts";
import { notFoundAuthorization } from "../mandates/authorization.ts";
import { notFoundMandate } from "../mandates/mandates.ts";
import { notFoundCoupon } from "../subscriptions/coupons.ts";
import { notFoundPrice } from "../subscriptions/prices.ts";
import { notFoundInvoice, notFoundSubscription } from "../subscriptions/subscriptions.ts";
import { notFoundEndpoint } from "../webhooks/endpoints.ts";
import { AUTHORIZATION_TOKEN } from "./authorization-page/routes.ts";
import { idParam } from "./input-guard.ts";

export const mandateIdParam = idParam("mandate", notFoundMandate);
export const chargeIdParam = idParam("charge", notFoundCharge);
export const eventIdParam = idParam("event", notFoundEvent);
export const priceIdParam = idParam("price", notFoundPrice);
export const couponIdParam = idParam("coupon", notFoundCoupon);
export const subscriptionIdParam = idParam("subscription", notFoundSubscription);
export const invoiceIdParam = idParam("invoice", notFoundInvoice);
export const endpointIdParam = idParam("webhookEndpoint", notFoundEndpoint);
export const authorizationTokenParam = {
  pattern: AUTHORIZATION_TOKEN,
  notFound: () => notFoundAuthorization,
};
