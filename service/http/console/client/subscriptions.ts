/**
 * Subscriptions: the list with a status filter; one subscription with its trial, pending update or
 * scheduled change (and Drop), paused collection (and Resume), credit, invoices and Cancel (now, or at
 * the end of the period last invoiced).
 */
import { html } from "htm/preact";
import { useEffect, useState } from "preact/hooks";
import { everyValue, type Schemas, type StatusFilter, unwrap } from "./api.ts";
import { useBusy } from "./busy.ts";
import { dateTime } from "./format.ts";
import { useLoaded } from "./loaded.ts";
import type { PageProps } from "./page-props.ts";
import { hrefOf } from "./router.ts";

type Subscription = Schemas["Subscription"];
type SubscriptionStatus = StatusFilter<"listSubscriptions">;

const STATUSES = everyValue<SubscriptionStatus>()([
  "incomplete",
  "trialing",
  "active",
  "past_due",
  "canceled",
]);

const SubscriptionList = ({ client, fail }: PageProps) => {
  const [status, setStatus] = useState("");
  const { value: subscriptions } = useLoaded(
    async () => {
      const query = status === "" ? { limit: 50 } : { limit: 50, status: status as SubscriptionStatus };
      return (await unwrap(client.GET("/v1/subscriptions", { params: { query } }))).data;
    },
    fail,
    [client, status],
  );

  return html`<h1>Subscriptions</h1>
    <div class="filter">
      <label for="subscription-status">Status</label>
      <select id="subscription-status" value=${status}
        onChange=${(e: Event) => setStatus((e.currentTarget as HTMLSelectElement).value)}>
        <option value="">All statuses</option>
        ${STATUSES.map((s) => html`<option key=${s} value=${s}>${s}</option>`)}
      </select>
    </div>
    ${
      subscriptions === null
        ? html`<p>Loading…</p>`
        : subscriptions.length === 0
          ? html`<p>No subscriptions.</p>`
          : html`<div class="table-wrap"><table>
            <thead><tr><th scope="col">Subscription</th><th scope="col">Status</th><th scope="col">Customer</th><th scope="col">Price</th><th scope="col">Next invoice</th><th scope="col">Created</th></tr></thead>
            <tbody>
              ${subscriptions.map(
                (subscription) => html`<tr key=${subscription.id}>
                  <th scope="row"><a href=${hrefOf({ page: "subscriptions", subscriptionId: subscription.id })}>${subscription.id}</a></th>
                  <td><span class=${`badge ${subscription.status}`}>${subscription.status}</span></td>
                  <td><code>${subscription.customer}</code></td>
                  <td>${subscription.price}</td>
                  <td>${subscription.next_billing_at === null ? "" : dateTime(subscription.next_billing_at)}</td>
                  <td>${dateTime(subscription.created)}</td>
                </tr>`,
              )}
            </tbody>
          </table></div>`
    }`;
};

const Invoices = ({ invoices }: { readonly invoices: readonly Schemas["Invoice"][] | null }) =>
  invoices === null
    ? html`<p>Loading invoices…</p>`
    : invoices.length === 0
      ? html`<p>No invoices yet.</p>`
      : html`<div class="table-wrap"><table>
          <thead><tr><th scope="col">Invoice</th><th scope="col">Status</th><th scope="col">Period</th><th scope="col">Total</th><th scope="col">Paid</th><th scope="col">Attempts</th></tr></thead>
          <tbody>
            ${invoices.map(
              (invoice) => html`<tr key=${invoice.id}>
                <th scope="row">${invoice.id}</th>
                <td><span class=${`badge ${invoice.status}`}>${invoice.status}</span></td>
                <td>${dateTime(invoice.period_start)} – ${dateTime(invoice.period_end)}</td>
                <td>${invoice.total_decimal} ${invoice.token}</td>
                <td>${invoice.amount_paid_decimal}</td>
                <td>${invoice.attempt_count}${
                  invoice.next_payment_attempt === null
                    ? ""
                    : ` (next ${dateTime(invoice.next_payment_attempt)})`
                }</td>
              </tr>`,
            )}
          </tbody>
        </table></div>`;

const SubscriptionDetail = ({
  client,
  announce,
  fail,
  subscriptionId,
}: PageProps & { readonly subscriptionId: string }) => {
  const [subscription, setSubscription] = useState<Subscription | null>(null);
  const [invoices, setInvoices] = useState<readonly Schemas["Invoice"][] | null>(null);
  const { busy, run } = useBusy(fail);

  useEffect(() => {
    unwrap(client.GET("/v1/subscriptions/{id}", { params: { path: { id: subscriptionId } } }))
      .then(setSubscription)
      .catch(fail);
    unwrap(client.GET("/v1/invoices", { params: { query: { subscription: subscriptionId, limit: 100 } } }))
      .then((list) => setInvoices(list.data))
      .catch(fail);
  }, [client, fail, subscriptionId]);

  const dropChange = async () => {
    if (!window.confirm(`Drop the change waiting on ${subscriptionId}? Its price stays as it is.`)) return;
    await run(async () => {
      setSubscription(
        await unwrap(
          client.DELETE("/v1/subscriptions/{id}/pending_update", {
            params: { path: { id: subscriptionId } },
          }),
        ),
      );
      announce(`The change waiting on ${subscriptionId} was dropped.`);
    });
  };

  const resume = async () => {
    await run(async () => {
      setSubscription(
        await unwrap(
          client.POST("/v1/subscriptions/{id}", {
            params: { path: { id: subscriptionId } },
            body: { pause_collection: null },
          }),
        ),
      );
      announce(`Collection of ${subscriptionId} resumed.`);
    });
  };

  const cancel = async (atPeriodEnd: boolean) => {
    const question = atPeriodEnd
      ? `Cancel ${subscriptionId} at the end of the period last invoiced?`
      : `Cancel ${subscriptionId} now? Its open invoices are voided.`;
    if (!window.confirm(question)) return;
    await run(async () => {
      const canceled = await unwrap(
        client.POST("/v1/subscriptions/{id}/cancel", {
          params: { path: { id: subscriptionId } },
          body: { at_period_end: atPeriodEnd },
        }),
      );
      setSubscription(canceled);
      announce(
        atPeriodEnd ? `${subscriptionId} will end at the period's end.` : `${subscriptionId} canceled.`,
      );
    });
  };

  return html`<p><a href=${hrefOf({ page: "subscriptions", subscriptionId: null })}>← All subscriptions</a></p>
    <h1>Subscription</h1>
    ${
      subscription === null
        ? html`<p>Loading…</p>`
        : html`<p class="muted">${subscription.id} · chain ${subscription.chain} · ${subscription.livemode ? "live" : "test"}</p>
          <p>Status: <span class=${`badge ${subscription.status}`}>${subscription.status}</span>
            ${subscription.cancel_at_period_end ? " (ends at the period's end)" : ""}
            ${subscription.cancellation_reason === null ? "" : ` (${subscription.cancellation_reason})`}</p>
          <dl class="terms">
            <dt>Customer</dt><dd><code>${subscription.customer}</code></dd>
            <dt>Price</dt><dd>${subscription.price}</dd>
            <dt>Mandate</dt><dd><a href=${hrefOf({ page: "mandates", mandateId: subscription.mandate })}>${subscription.mandate}</a></dd>
            <dt>Cap</dt><dd>${subscription.cap_decimal} ${subscription.token}</dd>
            ${
              subscription.discount === null
                ? null
                : html`<dt>Coupon</dt><dd>${subscription.discount.coupon}</dd>`
            }
            ${
              subscription.next_billing_at === null
                ? null
                : html`<dt>Next invoice</dt><dd>${dateTime(subscription.next_billing_at)}</dd>`
            }
            ${
              subscription.trial_end === null
                ? null
                : html`<dt>Trial</dt><dd>${subscription.trial_start === null ? "" : dateTime(subscription.trial_start)} – ${dateTime(subscription.trial_end)}</dd>`
            }
            ${
              subscription.credit_balance_decimal === "0"
                ? null
                : html`<dt>Credit</dt><dd>${subscription.credit_balance_decimal} ${subscription.token}</dd>`
            }
          </dl>
          ${
            subscription.pending_update === null
              ? null
              : html`<section class="card" aria-label="Pending update">
                <h2>Pending update</h2>
                <p>To <strong>${subscription.pending_update.price}</strong>${
                  subscription.pending_update.coupon === null
                    ? ""
                    : ` with ${subscription.pending_update.coupon}`
                }: the next invoice would be ${subscription.pending_update.amount_due_decimal} ${subscription.token}, above the cap of ${subscription.cap_decimal}. It applies once the customer signs a higher cap at the mandate's link, and expires ${dateTime(subscription.pending_update.expires_at)}.</p>
                <div class="actions"><button data-mutates type="button" class="secondary" disabled=${busy} onClick=${dropChange}>Drop the pending update</button></div>
              </section>`
          }
          ${
            subscription.scheduled_change === null
              ? null
              : html`<section class="card" aria-label="Scheduled change">
                <h2>Scheduled change</h2>
                <p>To <strong>${subscription.scheduled_change.price}</strong> at ${
                  subscription.scheduled_change.effective_at === null
                    ? "the next period"
                    : dateTime(subscription.scheduled_change.effective_at)
                }.</p>
                <div class="actions"><button data-mutates type="button" class="secondary" disabled=${busy} onClick=${dropChange}>Drop the scheduled change</button></div>
              </section>`
          }
          ${
            subscription.pause_collection === null
              ? null
              : html`<section class="card" aria-label="Collection paused">
                <h2>Collection paused</h2>
                <p>Each period's invoice is written ${subscription.pause_collection.behavior === "void" ? "void" : "uncollectible"}, and nothing is charged${
                  subscription.pause_collection.resumes_at === null
                    ? "."
                    : `, until ${dateTime(subscription.pause_collection.resumes_at)}.`
                }</p>
                <div class="actions"><button data-mutates type="button" class="secondary" disabled=${busy} onClick=${resume}>Resume collection</button></div>
              </section>`
          }
          ${
            subscription.status === "canceled"
              ? null
              : html`<div class="actions">
                <button data-mutates type="button" class="secondary" disabled=${busy || subscription.cancel_at_period_end}
                  onClick=${() => cancel(true)}>Cancel at period end</button>
                <button data-mutates type="button" class="danger" disabled=${busy} onClick=${() => cancel(false)}>Cancel now</button>
              </div>`
          }`
    }
    <h2>Invoices</h2>
    <${Invoices} invoices=${invoices} />`;
};

export const Subscriptions = (props: PageProps & { readonly subscriptionId: string | null }) =>
  props.subscriptionId === null
    ? html`<${SubscriptionList} ...${props} />`
    : html`<${SubscriptionDetail} key=${props.subscriptionId} ...${props} subscriptionId=${props.subscriptionId} />`;
