/**
 * Reports: a month closed in a time zone (the period report), per chain and token, with its invoices;
 * and the download of the balance transactions of any range (a same-origin GET with the session cookie).
 */
import { html } from "htm/preact";
import { useState } from "preact/hooks";
import { unwrap } from "./api.ts";
import { dateTime } from "./format.ts";
import { useLoaded } from "./loaded.ts";
import type { PageProps } from "./page-props.ts";

const thisMonth = () => new Date().toISOString().slice(0, 7);
const browserZone = () => Intl.DateTimeFormat().resolvedOptions().timeZone ?? "UTC";
const inputValue = (event: Event): string => (event.currentTarget as HTMLInputElement).value;

/** A `YYYY-MM-DD` date as unix seconds at 00:00 UTC. */
const dayStart = (day: string): number => Math.floor(Date.parse(`${day}T00:00:00Z`) / 1000);

/** The download of every balance transaction from `from` to `to` (whole UTC days), streamed by the server. */
const downloadHref = (from: string, to: string, format: "csv" | "json"): string => {
  const search = new URLSearchParams({ format });
  if (from !== "") search.set("created_from", String(dayStart(from)));
  if (to !== "") search.set("created_to", String(dayStart(to) + 86_400));
  return `/v1/balance_transactions?${search.toString()}`;
};

interface Choice {
  readonly month: string;
  readonly zone: string;
}

export const Reports = ({ client, fail }: PageProps) => {
  const [draft, setDraft] = useState<Choice>(() => ({ month: thisMonth(), zone: browserZone() }));
  const [chosen, setChosen] = useState<Choice>(draft);
  const { value: report } = useLoaded(
    () =>
      unwrap(
        client.GET("/v1/reports/period", {
          params: { query: { month: chosen.month, time_zone: chosen.zone } },
        }),
      ),
    fail,
    [client, chosen],
  );
  const [range, setRange] = useState({ from: "", to: "" });
  const submit = (event: Event) => {
    event.preventDefault();
    setChosen({ ...draft });
  };
  return html`<h1>Reports</h1>
    <section class="card" aria-labelledby="period-title">
      <h2 id="period-title">Period close</h2>
      <form onSubmit=${submit}>
        <div class="range">
          <div><label for="report-month">Month</label>
            <input id="report-month" type="month" required value=${draft.month}
              onInput=${(e: Event) => setDraft({ ...draft, month: inputValue(e) })} /></div>
          <div><label for="report-zone">Time zone</label>
            <input id="report-zone" value=${draft.zone} required
              onInput=${(e: Event) => setDraft({ ...draft, zone: inputValue(e) })} /></div>
        </div>
        <div class="actions"><button type="submit">Show the month</button></div>
      </form>
    </section>
    <section class="card" aria-labelledby="download-title">
      <h2 id="download-title">Balance transactions</h2>
      <p class="muted">Every movement of the range, oldest first, however many (docs/balance.md has the columns).</p>
      <div class="range">
        <div><label for="download-from">From date (UTC)</label>
          <input id="download-from" type="date" value=${range.from}
            onInput=${(e: Event) => setRange({ ...range, from: inputValue(e) })} /></div>
        <div><label for="download-to">To date (UTC, inclusive)</label>
          <input id="download-to" type="date" value=${range.to}
            onInput=${(e: Event) => setRange({ ...range, to: inputValue(e) })} /></div>
      </div>
      <div class="actions">
        <a class="button-link" href=${downloadHref(range.from, range.to, "csv")} download="balance_transactions.csv">Download CSV</a>
        <a class="button-link" href=${downloadHref(range.from, range.to, "json")} download="balance_transactions.json">Download JSON</a>
      </div>
    </section>
    ${
      report === null
        ? html`<p>Loading…</p>`
        : html`<section aria-labelledby="money-title">
            <h2 id="money-title">Money, ${report.month} (${report.time_zone})</h2>
            <p class="muted">${dateTime(report.period_start)} to ${dateTime(report.period_end)}, exclusive.</p>
            ${
              report.balances.length === 0
                ? html`<p>No money moved in this month.</p>`
                : html`<div class="table-wrap"><table>
                  <thead><tr><th scope="col">Chain / token</th><th scope="col">Opening pending</th><th scope="col">Charges held</th><th scope="col">Payments held</th><th scope="col">Released</th><th scope="col">Returned</th><th scope="col">Closing pending</th><th scope="col">Paid straight to you</th><th scope="col">Available in</th><th scope="col">Gas paid by the service</th><th scope="col">Blocks</th></tr></thead>
                  <tbody>
                    ${report.balances.map(
                      (b) => html`<tr key=${`${b.chain}:${b.token_address}`}>
                        <th scope="row">${b.chain} / ${b.currency}</th>
                        <td>${b.opening_pending}</td><td>${b.charges_held}</td><td>${b.payments_held}</td>
                        <td>${b.released}</td><td>${b.returned}</td><td data-amount="closing">${b.closing_pending}</td>
                        <td>${(BigInt(b.charges_unheld) + BigInt(b.payments_unheld)).toString()}</td>
                        <td data-amount="available_in">${b.available_in}</td>
                        <td>${b.gas_wei} wei ${b.gas_currency ?? ""}</td>
                        <td>${b.first_block ?? "–"} – ${b.last_block ?? "–"}</td>
                      </tr>`,
                    )}
                  </tbody>
                </table></div>
                <p class="muted">Amounts in the token's base units.</p>`
            }
          </section>
          <section aria-labelledby="invoices-title">
            <h2 id="invoices-title">Invoices of periods starting in ${report.month}</h2>
            ${
              report.invoices.length === 0
                ? html`<p>No invoices.</p>`
                : html`<div class="table-wrap"><table>
                  <thead><tr><th scope="col">Chain / token</th><th scope="col">Paid</th><th scope="col">Open</th><th scope="col">Void</th><th scope="col">Uncollectible</th><th scope="col">Charge returned</th></tr></thead>
                  <tbody>
                    ${report.invoices.map(
                      (i) => html`<tr key=${`${i.chain}:${i.token_address}`}>
                        <th scope="row">${i.chain} / <code>${i.token_address}</code></th>
                        <td>${i.paid.count} (${i.paid.total})</td><td>${i.open.count} (${i.open.total})</td>
                        <td>${i.void.count} (${i.void.total})</td>
                        <td>${i.uncollectible.count} (${i.uncollectible.total})</td>
                        <td>${i.returned.count} (${i.returned.amount})</td>
                      </tr>`,
                    )}
                  </tbody>
                </table></div>`
            }
          </section>`
    }`;
};
