/** What each route's path params must look like; anything else gets the route's own 404. */
import { AUTHORIZATION_TOKEN_PATTERN, notFoundAuthorization } from "../mandates/authorization-session.ts";
import { notFoundPayPage, PAY_PAGE_TOKEN_PATTERN } from "../payments/pay-session.ts";
import { notFoundPortal, PORTAL_TOKEN_PATTERN } from "../portal/portal-sessions.ts";
import { idParam } from "./input-guard.ts";

export const mandateIdParam = idParam("mandate");
export const chargeIdParam = idParam("charge");
export const paymentIdParam = idParam("payment");
export const eventIdParam = idParam("event");
export const priceIdParam = idParam("price");
export const couponIdParam = idParam("coupon");
export const subscriptionIdParam = idParam("subscription");
export const invoiceIdParam = idParam("invoice");
export const endpointIdParam = idParam("webhookEndpoint");
export const balanceTransactionIdParam = idParam("balanceTransaction");
export const authorizationTokenParam = {
  pattern: AUTHORIZATION_TOKEN_PATTERN,
  notFound: () => notFoundAuthorization,
};
export const payPageTokenParam = {
  pattern: PAY_PAGE_TOKEN_PATTERN,
  notFound: () => notFoundPayPage,
};
export const portalTokenParam = {
  pattern: PORTAL_TOKEN_PATTERN,
  notFound: () => notFoundPortal,
};
