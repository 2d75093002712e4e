/** The customer portal's examples: a session for the story's customer (shared.ts). */
import type { CreatePortalSession, PortalSessionObject } from "../../portal/portal-sessions.ts";
import { at, PUBLIC_URL } from "./shared.ts";

export const PORTAL_SESSION_ID = "bps_01KJQAB3Q0W4Y8XGS2RJ5N7D1M";

export const createPortalSession: CreatePortalSession = {
  customer: "cus_4821",
  return_url: "https://shop.example/account",
};

export const portalSession: PortalSessionObject = {
  id: PORTAL_SESSION_ID,
  object: "portal_session",
  livemode: false,
  customer: "cus_4821",
  url: `${PUBLIC_URL}/portal/Jx3kq8V0bP2mN7sW4tY6zA1cE5gH9iLo`,
  return_url: "https://shop.example/account",
  features: { subscription_cancel: { enabled: true }, mandate_revoke: { enabled: true } },
  expires_at: at(90_000),
  created: at(86_400),
};
