/**
 * Mandates: the list (status and customer filters, newest first, first 50) with a form to open one, and
 * one mandate with its terms (a raise of the cap waiting for the customer's signature among them), its
 * authorization URL, its charges and forms to change its cap and to charge it (read every 3 s), plus the
 * test helpers on a test-mode mandate.
 */
import { html } from "htm/preact";
import { useState } from "preact/hooks";
import { everyValue, type Schemas, type StatusFilter, unwrap } from "./api.ts";
import { useBusy } from "./busy.ts";
import { dateTime } from "./format.ts";
import { useLoaded } from "./loaded.ts";
import type { PageProps } from "./page-props.ts";
import { usePolling } from "./polling.ts";
import { hrefOf } from "./router.ts";
import { TestHelpers } from "./test-helpers.ts";

const POLL_MS = 3000;

type Mandate = Schemas["Mandate"];
type Charge = Schemas["Charge"];
type MandateStatus = StatusFilter<"listMandates">;

const STATUSES = everyValue<MandateStatus>()(["pending", "active", "requires_authorization", "revoked"]);

const inputValue = (e: Event) => (e.currentTarget as HTMLInputElement).value;

const CreateMandate = ({
  client,
  announce,
  fail,
  onCreated,
}: PageProps & { readonly onCreated: () => void }) => {
  const [cap, setCap] = useState("");
  const [customer, setCustomer] = useState("");
  const [reference, setReference] = useState("");
  const { busy, run } = useBusy(fail);

  const submit = async (event: Event) => {
    event.preventDefault();
    await run(async () => {
      const created = await unwrap(
        client.POST("/v1/mandates", {
          body: {
            cap_decimal: cap.trim(),
            period: "month",
            customer: customer.trim(),
            ...(reference.trim() === "" ? {} : { reference: reference.trim() }),
          },
        }),
      );
      setCap("");
      setCustomer("");
      setReference("");
      announce(`Mandate ${created.id} created: send the customer to its authorization URL.`);
      onCreated();
    });
  };

  return html`<section class="card" aria-labelledby="create-mandate-title">
    <h2 id="create-mandate-title">Open a mandate</h2>
    <form data-mutates onSubmit=${submit}>
      <label for="mandate-cap">Cap per period</label>
      <input
        id="mandate-cap"
        type="text"
        inputmode="decimal"
        required
        placeholder="25.00"
        value=${cap}
        onInput=${(e: Event) => setCap(inputValue(e))}
      />
      <label for="mandate-period">Period</label>
      <select id="mandate-period" value="month">
        <option value="month">Month</option>
      </select>
      <label for="mandate-customer">Customer</label>
      <input
        id="mandate-customer"
        type="text"
        required
        placeholder="cus_4821"
        value=${customer}
        onInput=${(e: Event) => setCustomer(inputValue(e))}
      />
      <label for="mandate-reference">Reference (optional)</label>
      <input
        id="mandate-reference"
        type="text"
        value=${reference}
        onInput=${(e: Event) => setReference(inputValue(e))}
      />
      <div class="actions">
        <button type="submit" disabled=${busy}>Open mandate</button>
      </div>
    </form>
  </section>`;
};

const MandateList = (props: PageProps) => {
  const { client, fail } = props;
  const [status, setStatus] = useState("");
  const [customer, setCustomer] = useState("");
  const { value: mandates, reload } = useLoaded(
    async () => {
      const query = {
        limit: 50,
        ...(status === "" ? {} : { status: status as MandateStatus }),
        ...(customer.trim() === "" ? {} : { customer: customer.trim() }),
      };
      return (await unwrap(client.GET("/v1/mandates", { params: { query } }))).data;
    },
    fail,
    [client, status, customer],
  );

  return html`<h1>Mandates</h1>
    <${CreateMandate} ...${props} onCreated=${reload} />
    <section aria-labelledby="mandates-title">
      <h2 id="mandates-title">Mandates</h2>
      <div class="filter">
        <label for="mandate-status">Status</label>
        <select id="mandate-status" value=${status} onChange=${(e: Event) => setStatus(inputValue(e))}>
          <option value="">All statuses</option>
          ${STATUSES.map((s) => html`<option key=${s} value=${s}>${s}</option>`)}
        </select>
        <label for="mandate-customer-filter">Filter by customer</label>
        <input
          id="mandate-customer-filter"
          type="search"
          value=${customer}
          onChange=${(e: Event) => setCustomer(inputValue(e))}
        />
      </div>
      ${
        mandates === null
          ? html`<p>Loading…</p>`
          : mandates.length === 0
            ? html`<p>No mandates.</p>`
            : html`<div class="table-wrap">
              <table>
                <thead>
                  <tr><th scope="col">Mandate</th><th scope="col">Status</th><th scope="col">Cap</th><th scope="col">Customer</th><th scope="col">Created</th></tr>
                </thead>
                <tbody>
                  ${mandates.map(
                    (m) => html`<tr key=${m.id} data-mandate=${m.id}>
                      <td><a href=${hrefOf({ page: "mandates", mandateId: m.id })}>${m.id}</a></td>
                      <td><span class=${`badge ${m.status}`}>${m.status}</span></td>
                      <td>
                        ${m.cap_decimal} ${m.token} / ${m.period}
                        ${m.pending_update === null ? null : html`<div class="muted" data-testid="pending-cap">raise to ${m.pending_update.cap_decimal} pending</div>`}
                      </td>
                      <td>${m.customer ?? "—"}</td>
                      <td>${dateTime(m.created)}</td>
                    </tr>`,
                  )}
                </tbody>
              </table>
            </div>`
      }
    </section>`;
};

const CopyUrl = ({ url }: { readonly url: string }) => {
  const [copied, setCopied] = useState(false);
  const copy = async () => {
    await navigator.clipboard.writeText(url).then(
      () => setCopied(true),
      () => setCopied(false),
    );
  };
  return html`<code data-testid="authorization-url">${url}</code>
    <button type="button" class="secondary small" onClick=${copy}>${copied ? "Copied" : "Copy URL"}</button>`;
};

const Terms = ({ mandate }: { readonly mandate: Mandate }) => {
  const rows: readonly (readonly [string, string])[] = [
    ["Cap", `${mandate.cap_decimal} ${mandate.token} per ${mandate.period}`],
    ...(mandate.pending_update === null
      ? []
      : [
          [
            "Pending raise",
            `${mandate.pending_update.cap_decimal} ${mandate.token} per ${mandate.period}, asked ${dateTime(mandate.pending_update.requested)}: waits for the customer's signature at the authorization URL`,
          ] as const,
        ]),
    ["Approval left", mandate.approval_left_decimal ?? "not signed yet"],
    ["Customer", mandate.customer ?? "—"],
    ["Reference", mandate.reference ?? "—"],
    ["Customer wallet", mandate.customer_address ?? "not signed yet"],
    ["Payee", mandate.payee_address],
    ["Token", `${mandate.token} (${mandate.token_address}) on chain ${mandate.chain}`],
    ["Created", dateTime(mandate.created)],
  ];
  return html`<dl class="terms">
    ${rows.map(([term, value]) => html`<dt key=${`t-${term}`}>${term}</dt><dd key=${`d-${term}`}>${value}</dd>`)}
    <dt>Authorization URL</dt>
    <dd><${CopyUrl} url=${mandate.authorization_url} /></dd>
  </dl>`;
};

const ChargeForm = ({
  client,
  announce,
  fail,
  mandate,
  onCharged,
}: PageProps & { readonly mandate: Mandate; readonly onCharged: () => void }) => {
  const [amount, setAmount] = useState("");
  const { busy, run } = useBusy(fail);
  const submit = async (event: Event) => {
    event.preventDefault();
    await run(async () => {
      const charge = await unwrap(
        client.POST("/v1/mandates/{id}/charges", {
          params: { path: { id: mandate.id } },
          body: { amount_decimal: amount.trim() },
        }),
      );
      setAmount("");
      announce(
        `Charge ${charge.id} of ${charge.amount_decimal} ${charge.token}: ${charge.status}${
          charge.failure_message === null ? "" : ` (${charge.failure_message})`
        }.`,
      );
      onCharged();
    });
  };
  return html`<form data-mutates onSubmit=${submit}>
    <label for="charge-amount">Amount (${mandate.token}, at most ${mandate.cap_decimal})</label>
    <input
      id="charge-amount"
      type="text"
      inputmode="decimal"
      required
      value=${amount}
      onInput=${(e: Event) => setAmount(inputValue(e))}
    />
    <div class="actions">
      <button type="submit" disabled=${busy}>Charge</button>
    </div>
  </form>`;
};

/** A new cap: higher waits for the customer's signature, lower is in force at once, the cap in force again cancels a raise. */
const CapForm = ({
  client,
  announce,
  fail,
  mandate,
  onChanged,
}: PageProps & { readonly mandate: Mandate; readonly onChanged: () => void }) => {
  const [cap, setCap] = useState("");
  const { busy, run } = useBusy(fail);
  const submit = async (event: Event) => {
    event.preventDefault();
    await run(async () => {
      const updated = await unwrap(
        client.POST("/v1/mandates/{id}", {
          params: { path: { id: mandate.id } },
          body: { cap_decimal: cap.trim() },
        }),
      );
      setCap("");
      announce(
        updated.pending_update === null
          ? `Cap of ${updated.id}: ${updated.cap_decimal} ${updated.token}.`
          : `Raise of ${updated.id} to ${updated.pending_update.cap_decimal} ${updated.token} requested: the customer signs it at the authorization URL.`,
      );
      onChanged();
    });
  };
  return html`<form data-mutates onSubmit=${submit}>
    <label for="mandate-new-cap">New cap (${mandate.token} per ${mandate.period})</label>
    <input
      id="mandate-new-cap"
      type="text"
      inputmode="decimal"
      required
      value=${cap}
      onInput=${(e: Event) => setCap(inputValue(e))}
    />
    <div class="actions">
      <button type="submit" disabled=${busy}>Change cap</button>
    </div>
  </form>`;
};

const Charges = ({ charges }: { readonly charges: readonly Charge[] | null }) =>
  charges === null
    ? html`<p>Loading charges…</p>`
    : charges.length === 0
      ? html`<p>No charges yet.</p>`
      : html`<div class="table-wrap">
        <table>
          <thead>
            <tr><th scope="col">Charge</th><th scope="col">Status</th><th scope="col">Amount</th><th scope="col">Period</th><th scope="col">Created</th></tr>
          </thead>
          <tbody>
            ${charges.map(
              (c) => html`<tr key=${c.id} data-charge=${c.id} data-status=${c.status}>
                <td>${c.id}</td>
                <td>
                  <span class=${`badge ${c.status}`}>${c.status}</span>
                  ${c.failure_message === null ? null : html`<div class="error-text">${c.failure_message}</div>`}
                </td>
                <td>${c.amount_decimal} ${c.token}</td>
                <td>${c.period}</td>
                <td>${dateTime(c.created)}</td>
              </tr>`,
            )}
          </tbody>
        </table>
      </div>`;

const MandateDetail = (props: PageProps & { readonly mandateId: string }) => {
  const { client, fail, mandateId } = props;
  const [mandate, setMandate] = useState<Mandate | null>(null);
  const [charges, setCharges] = useState<readonly Charge[] | null>(null);
  const path = { params: { path: { id: mandateId } } };

  const read = async () => {
    const [found, list] = await Promise.all([
      unwrap(client.GET("/v1/mandates/{id}", path)),
      unwrap(client.GET("/v1/mandates/{id}/charges", { params: { ...path.params, query: { limit: 50 } } })),
    ]);
    setMandate(found);
    setCharges(list.data);
  };
  usePolling(() => read().catch(fail), POLL_MS, [client, mandateId]);
  const refresh = () => void read().catch(fail);

  return html`<p><a href=${hrefOf({ page: "mandates", mandateId: null })}>← All mandates</a></p>
    <h1>Mandate</h1>
    ${
      mandate === null
        ? html`<p>Loading…</p>`
        : html`<p class="muted">
            ${mandate.id} · <span class=${`badge ${mandate.status}`} data-testid="mandate-status">${mandate.status}</span>
            · ${mandate.livemode ? "live" : "test"}
          </p>
          <${Terms} mandate=${mandate} />
          ${mandate.livemode ? null : html`<${TestHelpers} ...${props} mandate=${mandate} onDone=${refresh} />`}
          ${
            mandate.status === "revoked"
              ? null
              : html`<section class="card" aria-labelledby="cap-title">
                  <h2 id="cap-title">Change the cap</h2>
                  <p class="muted">
                    Higher: the customer signs it at the authorization URL, the cap in force holds until then. Lower: in
                    force at once.
                  </p>
                  <${CapForm} ...${props} mandate=${mandate} onChanged=${refresh} />
                </section>`
          }
          <section class="card" aria-labelledby="charge-title">
            <h2 id="charge-title">Charge this mandate</h2>
            <${ChargeForm} ...${props} mandate=${mandate} onCharged=${refresh} />
          </section>
          <section aria-labelledby="charges-title">
            <h2 id="charges-title">Charges</h2>
            <${Charges} charges=${charges} />
          </section>`
    }`;
};

export const Mandates = (props: PageProps & { readonly mandateId: string | null }) =>
  props.mandateId === null
    ? html`<${MandateList} ...${props} />`
    : html`<${MandateDetail} key=${props.mandateId} ...${props} mandateId=${props.mandateId} />`;
