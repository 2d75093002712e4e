/**
 * Reconciliation: a range (dates or block numbers, and a type), the first entries of that range, and a link
 * that downloads every entry of the range as CSV (a same-origin GET: the browser sends the session cookie).
 */
import { html } from "htm/preact";
import { useState } from "preact/hooks";
import type { operations } from "../../../../client/index.ts";
import { unwrap } from "./api.ts";
import { dateTime } from "./format.ts";
import { useLoaded } from "./loaded.ts";
import type { PageProps } from "./page-props.ts";

type Query = NonNullable<operations["listReconciliation"]["parameters"]["query"]>;
type EntryType = NonNullable<Query["type"]>;

const TYPES: readonly EntryType[] = [
  "charge",
  "release",
  "return",
  "payment",
  "payment_release",
  "payment_return",
];
const LIMIT = 100;

interface Range {
  readonly from: string;
  readonly to: string;
  readonly fromBlock: string;
  readonly toBlock: string;
  readonly type: string;
}

const EMPTY: Range = { from: "", to: "", fromBlock: "", toBlock: "", type: "" };

/** A `YYYY-MM-DD` date as unix seconds at 00:00 UTC (the end of the day for `to`). */
const dayStart = (day: string): number => Math.floor(Date.parse(`${day}T00:00:00Z`) / 1000);

const queryOf = (range: Range): Query => ({
  limit: LIMIT,
  ...(range.from === "" ? {} : { from: dayStart(range.from) }),
  ...(range.to === "" ? {} : { to: dayStart(range.to) + 86399 }),
  ...(range.fromBlock.trim() === "" ? {} : { from_block: Number(range.fromBlock) }),
  ...(range.toBlock.trim() === "" ? {} : { to_block: Number(range.toBlock) }),
  ...(range.type === "" ? {} : { type: range.type as EntryType }),
});

/** The download of every entry of the range (the server streams it, however many): no page limit. */
const csvHref = (query: Query): string => {
  const search = new URLSearchParams();
  for (const [key, value] of Object.entries(query)) if (key !== "limit") search.set(key, String(value));
  search.set("format", "csv");
  return `/v1/reconciliation?${search.toString()}`;
};

const inputValue = (event: Event): string => (event.currentTarget as HTMLInputElement).value;

export const Reconciliation = ({ client, fail }: PageProps) => {
  const [draft, setDraft] = useState<Range>(EMPTY);
  const [range, setRange] = useState<Range>(EMPTY);
  const { value: page } = useLoaded(
    () => unwrap(client.GET("/v1/reconciliation", { params: { query: queryOf(range) } })),
    fail,
    [client, range],
  );
  const entries = page?.data ?? null;
  const hasMore = page?.has_more ?? false;

  const field = (key: keyof Range) => (event: Event) => setDraft({ ...draft, [key]: inputValue(event) });
  // A new range object each time: "Show entries" reads again even when the range is unchanged.
  const submit = (event: Event) => {
    event.preventDefault();
    setRange({ ...draft });
  };

  return html`<h1>Reconciliation</h1>
    <section class="card" aria-labelledby="range-title">
      <h2 id="range-title">Range</h2>
      <form onSubmit=${submit}>
        <div class="range">
          <div><label for="rec-from">From date (UTC)</label>
            <input id="rec-from" type="date" value=${draft.from} onInput=${field("from")} /></div>
          <div><label for="rec-to">To date (UTC)</label>
            <input id="rec-to" type="date" value=${draft.to} onInput=${field("to")} /></div>
          <div><label for="rec-from-block">From block</label>
            <input id="rec-from-block" type="number" min="0" value=${draft.fromBlock} onInput=${field("fromBlock")} /></div>
          <div><label for="rec-to-block">To block</label>
            <input id="rec-to-block" type="number" min="0" value=${draft.toBlock} onInput=${field("toBlock")} /></div>
          <div><label for="rec-type">Type</label>
            <select id="rec-type" value=${draft.type} onChange=${field("type")}>
              <option value="">All types</option>
              ${TYPES.map((t) => html`<option key=${t} value=${t}>${t}</option>`)}
            </select></div>
        </div>
        <div class="actions">
          <button type="submit">Show entries</button>
          <a class="button-link" href=${csvHref(queryOf(range))} download="reconciliation.csv">Download CSV</a>
        </div>
      </form>
    </section>
    <section aria-labelledby="entries-title">
      <h2 id="entries-title">Entries</h2>
      ${
        entries === null
          ? html`<p>Loading…</p>`
          : entries.length === 0
            ? html`<p>No entries in this range.</p>`
            : html`<div class="table-wrap"><table>
              <thead><tr><th scope="col">Type</th><th scope="col">Amount</th><th scope="col">Deposit address or mandate</th><th scope="col">Chain / block</th><th scope="col">Time</th><th scope="col">Transaction</th><th scope="col">Confirmations</th></tr></thead>
              <tbody>
                ${entries.map(
                  (entry) => html`<tr key=${entry.cursor} data-type=${entry.type}>
                    <th scope="row">${entry.type}</th>
                    <td>${entry.amount_decimal ?? entry.amount} ${entry.token ?? ""}</td>
                    <td><code>${entry.deposit_address ?? entry.mandate ?? ""}</code></td>
                    <td>${entry.chain} / ${entry.block_number}</td>
                    <td>${dateTime(entry.timestamp)}</td>
                    <td><code>${entry.transaction_hash}</code></td>
                    <td>${entry.confirmations}</td>
                  </tr>`,
                )}
              </tbody>
            </table></div>
            ${hasMore ? html`<p class="muted">Showing the first ${LIMIT}: narrow the range, or download the CSV, which has every entry of the range.</p>` : null}`
      }
    </section>`;
};
