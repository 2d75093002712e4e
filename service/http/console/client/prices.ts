/** Prices and coupons: both lists, a form to create each, and Deactivate / Reactivate for a price. */
import { html } from "htm/preact";
import { useCallback, useEffect, useState } from "preact/hooks";
import { type Schemas, unwrap } from "./api.ts";
import { useBusy } from "./busy.ts";
import { dateTime } from "./format.ts";
import type { PageProps } from "./page-props.ts";

type Price = Schemas["Price"];
type Coupon = Schemas["Coupon"];

const inputValue = (event: Event): string => (event.currentTarget as HTMLInputElement).value;
const optional = <K extends string>(key: K, value: string): Partial<Record<K, string>> =>
  (value.trim() === "" ? {} : { [key]: value.trim() }) as Partial<Record<K, string>>;

const CreatePrice = ({
  client,
  announce,
  fail,
  onCreated,
}: PageProps & { readonly onCreated: () => void }) => {
  const [name, setName] = useState("");
  const [amount, setAmount] = useState("");
  const [token, setToken] = useState("");
  const [unitAmount, setUnitAmount] = useState("");
  const [unit, setUnit] = useState("");
  const { busy, run } = useBusy(fail);

  const submit = async (event: Event) => {
    event.preventDefault();
    await run(async () => {
      const metered = unitAmount.trim() !== "" || unit.trim() !== "";
      const created = await unwrap(
        client.POST("/v1/prices", {
          body: {
            product_name: name.trim(),
            amount_decimal: amount.trim(),
            ...optional("token", token),
            ...(metered ? { usage: { unit_amount_decimal: unitAmount.trim(), unit: unit.trim() } } : {}),
          },
        }),
      );
      setName("");
      setAmount("");
      setUnitAmount("");
      setUnit("");
      announce(`Price ${created.id} created.`);
      onCreated();
    });
  };

  return html`<section class="card" aria-labelledby="create-price-title">
    <h2 id="create-price-title">Add a monthly price</h2>
    <form data-mutates onSubmit=${submit}>
      <label for="price-name">Product name</label>
      <input id="price-name" type="text" required value=${name} onInput=${(e: Event) => setName(inputValue(e))} />
      <label for="price-amount">Amount per month</label>
      <input id="price-amount" type="text" required inputmode="decimal" placeholder="19.99" value=${amount}
        onInput=${(e: Event) => setAmount(inputValue(e))} />
      <label for="price-token">Token (optional: your only token)</label>
      <input id="price-token" type="text" value=${token} onInput=${(e: Event) => setToken(inputValue(e))} />
      <fieldset>
        <legend>Metered part (optional)</legend>
        <label for="price-unit-amount">Price per unit</label>
        <input id="price-unit-amount" type="text" inputmode="decimal" value=${unitAmount}
          onInput=${(e: Event) => setUnitAmount(inputValue(e))} />
        <label for="price-unit">Unit name</label>
        <input id="price-unit" type="text" placeholder="api_call" value=${unit} onInput=${(e: Event) => setUnit(inputValue(e))} />
      </fieldset>
      <button type="submit" disabled=${busy}>Add price</button>
    </form>
  </section>`;
};

const CreateCoupon = ({
  client,
  announce,
  fail,
  onCreated,
}: PageProps & { readonly onCreated: () => void }) => {
  const [name, setName] = useState("");
  const [kind, setKind] = useState<"percent" | "amount">("percent");
  const [value, setValue] = useState("");
  const [token, setToken] = useState("");
  const [months, setMonths] = useState("1");
  const { busy, run } = useBusy(fail);

  const submit = async (event: Event) => {
    event.preventDefault();
    await run(async () => {
      const off =
        kind === "percent"
          ? { percent_off: Number(value) }
          : { amount_off_decimal: value.trim(), ...optional("token", token) };
      const created = await unwrap(
        client.POST("/v1/coupons", {
          body: { ...optional("name", name), ...off, duration_in_months: Number(months) },
        }),
      );
      setName("");
      setValue("");
      announce(`Coupon ${created.id} created.`);
      onCreated();
    });
  };

  return html`<section class="card" aria-labelledby="create-coupon-title">
    <h2 id="create-coupon-title">Add a coupon</h2>
    <form data-mutates onSubmit=${submit}>
      <label for="coupon-name">Name (optional)</label>
      <input id="coupon-name" type="text" value=${name} onInput=${(e: Event) => setName(inputValue(e))} />
      <label for="coupon-kind">Discount</label>
      <select id="coupon-kind" value=${kind}
        onChange=${(e: Event) => setKind((e.currentTarget as HTMLSelectElement).value === "amount" ? "amount" : "percent")}>
        <option value="percent">Percent off</option>
        <option value="amount">Amount off</option>
      </select>
      <label for="coupon-value">${kind === "percent" ? "Percent off" : "Amount off"}</label>
      <input id="coupon-value" type="text" required inputmode="decimal" value=${value}
        onInput=${(e: Event) => setValue(inputValue(e))} />
      ${
        kind === "amount"
          ? html`<label for="coupon-token">Token (optional)</label>
            <input id="coupon-token" type="text" value=${token} onInput=${(e: Event) => setToken(inputValue(e))} />`
          : null
      }
      <label for="coupon-months">Duration in months</label>
      <input id="coupon-months" type="number" required min="1" max="120" value=${months}
        onInput=${(e: Event) => setMonths(inputValue(e))} />
      <button type="submit" disabled=${busy}>Add coupon</button>
    </form>
  </section>`;
};

const couponOff = (coupon: Coupon): string =>
  coupon.amount_off_decimal !== null
    ? `${coupon.amount_off_decimal} ${coupon.token ?? ""} off`
    : `${String(coupon.percent_off)}% off`;

export const Prices = (props: PageProps) => {
  const { client, announce, fail } = props;
  const [prices, setPrices] = useState<readonly Price[] | null>(null);
  const [coupons, setCoupons] = useState<readonly Coupon[] | null>(null);
  const { busy, run } = useBusy(fail);

  const readPrices = useCallback(
    () =>
      unwrap(client.GET("/v1/prices", { params: { query: { limit: 100 } } }))
        .then((list) => setPrices(list.data))
        .catch(fail),
    [client, fail],
  );
  const readCoupons = useCallback(
    () =>
      unwrap(client.GET("/v1/coupons", { params: { query: { limit: 100 } } }))
        .then((list) => setCoupons(list.data))
        .catch(fail),
    [client, fail],
  );
  useEffect(() => {
    void readPrices();
    void readCoupons();
  }, [readPrices, readCoupons]);

  const toggle = async (price: Price) => {
    await run(async () => {
      await unwrap(
        client.POST("/v1/prices/{id}", {
          params: { path: { id: price.id } },
          body: { active: !price.active },
        }),
      );
      announce(`Price ${price.id} ${price.active ? "deactivated" : "reactivated"}.`);
      await readPrices();
    });
  };

  return html`<h1>Prices and coupons</h1>
    <${CreatePrice} ...${props} onCreated=${readPrices} />
    <section aria-labelledby="prices-title">
      <h2 id="prices-title">Prices</h2>
      ${
        prices === null
          ? html`<p>Loading…</p>`
          : prices.length === 0
            ? html`<p>No prices yet.</p>`
            : html`<div class="table-wrap"><table>
              <thead><tr><th scope="col">Product</th><th scope="col">Amount</th><th scope="col">Metered</th><th scope="col">Status</th><th scope="col">Created</th><th scope="col"><span class="muted">Action</span></th></tr></thead>
              <tbody>
                ${prices.map(
                  (price) => html`<tr key=${price.id} data-price=${price.id}>
                    <th scope="row">${price.product_name} <span class="muted">${price.id}</span></th>
                    <td>${price.amount_decimal} ${price.token} / ${price.interval}</td>
                    <td>${price.usage === null ? "" : `${price.usage.unit_amount_decimal} per ${price.usage.unit}`}</td>
                    <td><span class=${`badge ${price.active ? "enabled" : "disabled"}`}>${price.active ? "active" : "inactive"}</span></td>
                    <td>${dateTime(price.created)}</td>
                    <td><button data-mutates type="button" class="secondary" disabled=${busy}
                      aria-label=${`${price.active ? "Deactivate" : "Reactivate"} ${price.product_name}`}
                      onClick=${() => toggle(price)}>${price.active ? "Deactivate" : "Reactivate"}</button></td>
                  </tr>`,
                )}
              </tbody>
            </table></div>`
      }
    </section>
    <${CreateCoupon} ...${props} onCreated=${readCoupons} />
    <section aria-labelledby="coupons-title">
      <h2 id="coupons-title">Coupons</h2>
      ${
        coupons === null
          ? html`<p>Loading…</p>`
          : coupons.length === 0
            ? html`<p>No coupons yet.</p>`
            : html`<div class="table-wrap"><table>
              <thead><tr><th scope="col">Coupon</th><th scope="col">Discount</th><th scope="col">Months</th><th scope="col">Created</th></tr></thead>
              <tbody>
                ${coupons.map(
                  (coupon) => html`<tr key=${coupon.id} data-coupon=${coupon.id}>
                    <th scope="row">${coupon.name ?? coupon.id} <span class="muted">${coupon.id}</span></th>
                    <td>${couponOff(coupon)}</td>
                    <td>${coupon.duration_in_months}</td>
                    <td>${dateTime(coupon.created)}</td>
                  </tr>`,
                )}
              </tbody>
            </table></div>`
      }
    </section>`;
};
