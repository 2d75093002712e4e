/** The JSON the portal page exchanges with the service (see docs/portal.md). */
import type {
  RevocationObject,
  RevocationRequestObject,
  RevocationSubmission,
} from "../../../mandates/revocations.ts";
import type { PortalMandate, PortalSubscription, PortalView } from "../../../portal/portal-view.ts";

export type { Address, TypedData } from "../../hosted-page/client/wallet.ts";

/** The portal as the service sends it: the server's types, imported for their shape only (erased by the bundler). */
export type Session = PortalView;
export type Mandate = PortalMandate;
export type Subscription = PortalSubscription;
export type RevocationRequest = RevocationRequestObject;
export type Revocation = RevocationObject;
export type SignedRevocation = RevocationSubmission;
