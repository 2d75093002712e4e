/** Balance: per chain and token, what the escrow holds for the merchant, what reached its payout address, what went back. */
import { html } from "htm/preact";
import { unwrap } from "./api.ts";
import { useLoaded } from "./loaded.ts";
import type { PageProps } from "./page-props.ts";

export const Balance = ({ client, fail }: PageProps) => {
  const { value: balance } = useLoaded(() => unwrap(client.GET("/v1/balance")), fail, [client]);
  const amounts = balance?.amounts ?? null;
  return html`<h1>Balance</h1>
    <p class="muted">Sums of your balance transactions, confirmed on chain. Gas is paid by the service, not from these.</p>
    ${
      amounts === null
        ? html`<p>Loading…</p>`
        : amounts.length === 0
          ? html`<p>No money has moved yet.</p>`
          : html`<div class="table-wrap"><table>
            <thead><tr><th scope="col">Chain</th><th scope="col">Token</th><th scope="col">Pending (in escrow)</th><th scope="col">Available (paid out to you)</th><th scope="col">Returned to customers</th></tr></thead>
            <tbody>
              ${amounts.map(
                (a) => html`<tr key=${`${a.chain}:${a.token_address}`} data-token=${a.token_address}>
                  <th scope="row">${a.chain}</th>
                  <td>${a.currency} <code>${a.token_address}</code></td>
                  <td data-amount="pending">${a.pending_decimal}</td>
                  <td data-amount="available">${a.available_decimal}</td>
                  <td data-amount="returned">${a.returned_decimal}</td>
                </tr>`,
              )}
            </tbody>
          </table></div>`
    }`;
};
