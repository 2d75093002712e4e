import { Context, Layer } from "effect";

/** The service's public base URL (PUBLIC_URL, else where it listens): the root of the hosted pages' links (authorization, pay). */
export class PublicUrl extends Context.Service<PublicUrl, { readonly url: string }>()("PublicUrl") {
  static readonly layer = (url: string) => Layer.succeed(PublicUrl, { url: url.replace(/\/+$/, "") });
}
