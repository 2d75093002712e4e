/** Overview: the chains, this merchant's payout addresses, and the latest events (read every 3 s). */
import { html } from "htm/preact";
import { useEffect, useState } from "preact/hooks";
import { type Schemas, unwrap } from "./api.ts";
import { EventItems } from "./event-items.ts";
import { yesNo } from "./format.ts";
import type { PageProps } from "./page-props.ts";
import { usePolling } from "./polling.ts";

const POLL_MS = 3000;

export const Overview = ({ client, fail }: PageProps) => {
  const [chains, setChains] = useState<readonly Schemas["Chain"][] | null>(null);
  const [payouts, setPayouts] = useState<readonly Schemas["MerchantChain"][] | null>(null);
  const [events, setEvents] = useState<readonly Schemas["Event"][] | null>(null);

  useEffect(() => {
    unwrap(client.GET("/v1/chains"))
      .then((list) => setChains(list.data))
      .catch(fail);
    unwrap(client.GET("/v1/merchant/chains"))
      .then((list) => setPayouts(list.data))
      .catch(fail);
  }, [client, fail]);

  usePolling(
    () =>
      unwrap(client.GET("/v1/events", { params: { query: { limit: 10 } } }))
        .then((list) => setEvents(list.data))
        .catch(fail),
    POLL_MS,
    [client],
  );

  return html`<h1>Overview</h1>
    <section aria-labelledby="chains-title">
      <h2 id="chains-title">Chains</h2>
      ${
        chains === null
          ? html`<p>Loading…</p>`
          : html`<div class="table-wrap"><table>
            <thead><tr><th scope="col">Chain</th><th scope="col">Subscriptions</th><th scope="col">Payments</th><th scope="col">Escrow</th><th scope="col">Tokens</th></tr></thead>
            <tbody>
              ${chains.map(
                (chain) => html`<tr key=${chain.id} data-chain=${chain.id}>
                  <th scope="row">${chain.name} <span class="muted">(${chain.id})</span></th>
                  <td>${yesNo(chain.subscriptions_available)}</td>
                  <td>${yesNo(chain.payments_available)}</td>
                  <td>${yesNo(chain.escrow_available)}</td>
                  <td>${chain.tokens.map((token) => token.symbol).join(", ")}</td>
                </tr>`,
              )}
            </tbody>
          </table></div>`
      }
    </section>
    <section aria-labelledby="payouts-title">
      <h2 id="payouts-title">Payout addresses</h2>
      ${
        payouts === null
          ? html`<p>Loading…</p>`
          : payouts.length === 0
            ? html`<p>No chain configured yet (POST /v1/merchant/chains).</p>`
            : html`<ul class="plain">
              ${payouts.map(
                (payout) => html`<li key=${payout.id}>
                  <strong>${payout.name} (${payout.chain})</strong>: <code>${payout.payout_address}</code>
                </li>`,
              )}
            </ul>`
      }
    </section>
    <section aria-labelledby="recent-title">
      <h2 id="recent-title">Recent events</h2>
      <${EventItems} events=${events} empty="No events yet." />
    </section>`;
};
