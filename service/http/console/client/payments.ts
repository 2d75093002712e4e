/**
 * Payments: the list with a status filter and a form to create one; one payment with its amounts, deposit
 * address and pay page (Copy buttons), its transfers and Cancel while nothing has arrived (read every 3 s).
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

const POLL_MS = 3000;

type Payment = Schemas["Payment"];
type PaymentStatus = StatusFilter<"listPayments">;

const STATUSES = everyValue<PaymentStatus>()([
  "requires_payment",
  "processing",
  "paid",
  "underpaid",
  "expired",
  "canceled",
  "reversed",
]);

const inputValue = (event: Event): string => (event.currentTarget as HTMLInputElement).value;

/** A value with a Copy button (the clipboard answer in the button's label). */
export const Copyable = ({ label, value, testId }: { label: string; value: string; testId: string }) => {
  const [copied, setCopied] = useState(false);
  const copy = async () => {
    await navigator.clipboard.writeText(value).then(
      () => setCopied(true),
      () => setCopied(false),
    );
  };
  return html`<div class="copyable">
    <span class="muted">${label}: </span><code data-testid=${testId}>${value}</code>
    <button type="button" class="secondary" aria-label=${`Copy ${label.toLowerCase()}`} onClick=${copy}>
      ${copied ? "Copied" : "Copy"}
    </button>
  </div>`;
};

const CreatePayment = ({ client, announce, fail }: PageProps) => {
  const [amount, setAmount] = useState("");
  const [reference, setReference] = useState("");
  const [description, setDescription] = useState("");
  const [expiresIn, setExpiresIn] = useState("3600");
  const { busy, run } = useBusy(fail);

  const submit = async (event: Event) => {
    event.preventDefault();
    await run(async () => {
      const created = await unwrap(
        client.POST("/v1/payments", {
          body: {
            amount_decimal: amount.trim(),
            ...(reference.trim() === "" ? {} : { reference: reference.trim() }),
            ...(description.trim() === "" ? {} : { description: description.trim() }),
            ...(expiresIn.trim() === "" ? {} : { expires_in: Number(expiresIn) }),
          },
        }),
      );
      announce(`Payment ${created.id} created.`);
      window.location.hash = hrefOf({ page: "payments", paymentId: created.id });
    });
  };

  return html`<section class="card" aria-labelledby="create-payment-title">
    <h2 id="create-payment-title">Create a payment</h2>
    <form data-mutates onSubmit=${submit}>
      <label for="payment-amount">Amount</label>
      <input id="payment-amount" type="text" required inputmode="decimal" placeholder="49.90" value=${amount}
        onInput=${(e: Event) => setAmount(inputValue(e))} />
      <label for="payment-reference">Reference (optional)</label>
      <input id="payment-reference" type="text" placeholder="order_123" value=${reference}
        onInput=${(e: Event) => setReference(inputValue(e))} />
      <label for="payment-description">Description (optional)</label>
      <input id="payment-description" type="text" value=${description}
        onInput=${(e: Event) => setDescription(inputValue(e))} />
      <label for="payment-expires">Expires in (seconds)</label>
      <input id="payment-expires" type="number" min="60" max="604800" value=${expiresIn}
        onInput=${(e: Event) => setExpiresIn(inputValue(e))} />
      <button type="submit" disabled=${busy}>Create payment</button>
    </form>
  </section>`;
};

const PaymentList = (props: PageProps) => {
  const { client, fail } = props;
  const [status, setStatus] = useState("");
  const { value: payments } = useLoaded(
    async () => {
      const query = status === "" ? { limit: 50 } : { limit: 50, status: status as PaymentStatus };
      return (await unwrap(client.GET("/v1/payments", { params: { query } }))).data;
    },
    fail,
    [client, status],
  );

  return html`<h1>Payments</h1>
    <${CreatePayment} ...${props} />
    <section aria-labelledby="payments-title">
      <h2 id="payments-title">Payments</h2>
      <div class="filter">
        <label for="payment-status">Status</label>
        <select id="payment-status" value=${status}
          onChange=${(e: Event) => setStatus((e.currentTarget as HTMLSelectElement).value)}>
          <option value="">All statuses</option>
          ${STATUSES.map((s) => html`<option key=${s} value=${s}>${s}</option>`)}
        </select>
      </div>
      ${
        payments === null
          ? html`<p>Loading…</p>`
          : payments.length === 0
            ? html`<p>No payments.</p>`
            : html`<div class="table-wrap"><table>
              <thead><tr><th scope="col">Payment</th><th scope="col">Status</th><th scope="col">Amount</th><th scope="col">Received</th><th scope="col">Reference</th><th scope="col">Created</th></tr></thead>
              <tbody>
                ${payments.map(
                  (payment) => html`<tr key=${payment.id} data-payment=${payment.id}>
                    <th scope="row"><a href=${hrefOf({ page: "payments", paymentId: payment.id })}>${payment.id}</a></th>
                    <td><span class=${`badge ${payment.status}`}>${payment.status}</span></td>
                    <td>${payment.amount_decimal} ${payment.token}</td>
                    <td>${payment.amount_received_decimal}</td>
                    <td>${payment.reference ?? ""}</td>
                    <td>${dateTime(payment.created)}</td>
                  </tr>`,
                )}
              </tbody>
            </table></div>`
      }
    </section>`;
};

const Transfers = ({ payment }: { readonly payment: Payment }) =>
  payment.transfers.length === 0
    ? html`<p>No transfers yet.</p>`
    : html`<div class="table-wrap"><table>
        <thead><tr><th scope="col">Amount</th><th scope="col">From</th><th scope="col">Block</th><th scope="col">Time</th><th scope="col">Transaction</th></tr></thead>
        <tbody>
          ${payment.transfers.map(
            (transfer) => html`<tr key=${`${transfer.transaction_hash}:${transfer.log_index}`}>
              <td>${transfer.amount_decimal} ${payment.token}</td>
              <td><code>${transfer.from}</code></td>
              <td>${transfer.block_number}</td>
              <td>${dateTime(transfer.timestamp)}</td>
              <td><code>${transfer.transaction_hash}</code></td>
            </tr>`,
          )}
        </tbody>
      </table></div>`;

const PaymentDetail = ({ client, announce, fail, paymentId }: PageProps & { readonly paymentId: string }) => {
  const [payment, setPayment] = useState<Payment | null>(null);
  const { busy, run } = useBusy(fail);

  const read = () =>
    unwrap(client.GET("/v1/payments/{id}", { params: { path: { id: paymentId } } })).then(setPayment);
  usePolling(() => read().catch(fail), POLL_MS, [client, paymentId]);

  const cancel = async () => {
    if (!window.confirm(`Cancel the payment ${paymentId}?`)) return;
    await run(async () => {
      const canceled = await unwrap(
        client.POST("/v1/payments/{id}/cancel", { params: { path: { id: paymentId } }, body: {} }),
      );
      setPayment(canceled);
      announce(`Payment ${paymentId} canceled.`);
    });
  };

  return html`<p><a href=${hrefOf({ page: "payments", paymentId: null })}>← All payments</a></p>
    <h1>Payment</h1>
    ${
      payment === null
        ? html`<p>Loading…</p>`
        : html`<p class="muted">${payment.id} · chain ${payment.chain} · ${payment.livemode ? "live" : "test"}</p>
          <p>Status: <span class=${`badge ${payment.status}`} data-testid="payment-status">${payment.status}</span></p>
          <dl class="terms">
            <dt>Amount</dt><dd>${payment.amount_decimal} ${payment.token}</dd>
            <dt>Received</dt><dd>${payment.amount_received_decimal} ${payment.token}</dd>
            <dt>Remaining</dt><dd>${payment.amount_remaining_decimal} ${payment.token}</dd>
            <dt>Pending</dt><dd>${payment.amount_pending_decimal} ${payment.token}</dd>
            <dt>Expires</dt><dd>${dateTime(payment.expires_at)}</dd>
            ${payment.paid_at === null ? null : html`<dt>Paid</dt><dd>${dateTime(payment.paid_at)}</dd>`}
            ${payment.reference === null ? null : html`<dt>Reference</dt><dd>${payment.reference}</dd>`}
            ${payment.description === null ? null : html`<dt>Description</dt><dd>${payment.description}</dd>`}
          </dl>
          <${Copyable} label="Deposit address" value=${payment.address} testId="payment-address" />
          <${Copyable} label="Payment URL" value=${payment.payment_url} testId="payment-url" />
          ${
            payment.status === "requires_payment"
              ? html`<div class="actions">
                <button data-mutates type="button" class="danger" disabled=${busy} onClick=${cancel}>Cancel payment</button>
              </div>`
              : null
          }
          <h2>Transfers</h2>
          <${Transfers} payment=${payment} />`
    }`;
};

export const Payments = (props: PageProps & { readonly paymentId: string | null }) =>
  props.paymentId === null
    ? html`<${PaymentList} ...${props} />`
    : html`<${PaymentDetail} key=${props.paymentId} ...${props} paymentId=${props.paymentId} />`;
