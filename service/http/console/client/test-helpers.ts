/**
 * Test-mode helpers on a test mandate's detail: fund the customer's test wallet, sign the mandate with
 * that wallet, move the local chain's clock. Each answers once mined; the result goes to the status region.
 */
import { html } from "htm/preact";
import { useState } from "preact/hooks";
import { type Schemas, unwrap } from "./api.ts";
import { useBusy } from "./busy.ts";
import { dateTime } from "./format.ts";
import type { PageProps } from "./page-props.ts";

const DAY = 86_400;

export const TestHelpers = ({
  client,
  announce,
  fail,
  mandate,
  onDone,
}: PageProps & { readonly mandate: Schemas["Mandate"]; readonly onDone: () => void }) => {
  const [amount, setAmount] = useState("100");
  const [days, setDays] = useState("31");
  const { busy, run: runBusy } = useBusy(fail);
  const path = { params: { path: { id: mandate.id } } };

  const run = (action: () => Promise<string>) =>
    runBusy(async () => {
      announce(await action());
      onDone();
    });

  const fund = (event: Event) => {
    event.preventDefault();
    void run(async () => {
      const funded = await unwrap(
        client.POST("/v1/test/mandates/{id}/fund", { ...path, body: { amount_decimal: amount.trim() } }),
      );
      return `Funded ${funded.customer_address} with ${funded.amount_decimal} ${mandate.token}: balance ${funded.balance_decimal}.`;
    });
  };

  const authorize = () =>
    run(async () => {
      const signed = await unwrap(client.POST("/v1/test/mandates/{id}/authorize", { ...path, body: {} }));
      return `Mandate ${signed.id} signed by ${signed.customer_address ?? "the test wallet"}: ${signed.status}.`;
    });

  const advance = (event: Event) => {
    event.preventDefault();
    void run(async () => {
      const clock = await unwrap(
        client.POST("/v1/test/clock/advance", {
          body: { seconds: Math.round(Number(days) * DAY), chain: mandate.chain },
        }),
      );
      return `Chain ${clock.chain} clock advanced by ${clock.advanced_by} s: now ${dateTime(clock.now)}.`;
    });
  };

  return html`<section class="card test-helpers" aria-labelledby="test-helpers-title">
    <h2 id="test-helpers-title">Test helpers</h2>
    <p class="hint">Test mode only, on a local chain: each answers once its transaction is mined.</p>
    <form data-mutates onSubmit=${fund} class="inline-form">
      <label for="fund-amount">Fund the customer's test wallet (${mandate.token})</label>
      <input
        id="fund-amount"
        type="text"
        inputmode="decimal"
        required
        value=${amount}
        onInput=${(e: Event) => setAmount((e.currentTarget as HTMLInputElement).value)}
      />
      <button type="submit" disabled=${busy}>Fund test wallet</button>
    </form>
    <div class="actions">
      <button data-mutates type="button" disabled=${busy} onClick=${authorize}>Authorize with test wallet</button>
    </div>
    <form data-mutates onSubmit=${advance} class="inline-form">
      <label for="clock-days">Advance the test clock (days)</label>
      <input
        id="clock-days"
        type="number"
        min="1"
        step="1"
        required
        value=${days}
        onInput=${(e: Event) => setDays((e.currentTarget as HTMLInputElement).value)}
      />
      <button type="submit" disabled=${busy}>Advance clock</button>
    </form>
  </section>`;
};
