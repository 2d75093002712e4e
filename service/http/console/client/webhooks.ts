/**
 * Webhooks: the endpoints, a form to create one, each endpoint's actions and its deliveries with every
 * attempt (read every 3 s). A new or rotated secret is shown once, in this page's memory only: it is
 * gone when the page is left.
 */
import { html } from "htm/preact";
import { useEffect, useState } from "preact/hooks";
import { type Schemas, unwrap } from "./api.ts";
import { useBusy } from "./busy.ts";
import { dateTime } from "./format.ts";
import type { PageProps } from "./page-props.ts";
import { usePolling } from "./polling.ts";

const POLL_MS = 3000;

type Endpoint = Schemas["WebhookEndpoint"];
type Delivery = Schemas["WebhookDelivery"];

const SecretOnce = ({ secret, onDone }: { readonly secret: string; readonly onDone: () => void }) => {
  const [copied, setCopied] = useState(false);
  const copy = async () => {
    await navigator.clipboard.writeText(secret).then(
      () => setCopied(true),
      () => setCopied(false),
    );
  };
  return html`<div class="secret" role="region" aria-label="Signing secret">
    <p class="warning"><strong>Copy this signing secret now: it will not be shown again.</strong></p>
    <code class="secret-value" data-testid="secret">${secret}</code>
    <div class="actions">
      <button type="button" onClick=${copy}>${copied ? "Copied" : "Copy"}</button>
      <button type="button" class="secondary" onClick=${onDone}>I have stored it</button>
    </div>
  </div>`;
};

const CreateEndpoint = ({
  client,
  announce,
  fail,
  onCreated,
}: PageProps & { readonly onCreated: (created: Schemas["WebhookEndpointWithSecret"]) => void }) => {
  const [types, setTypes] = useState<readonly Schemas["EventType"][]>([]);
  const [url, setUrl] = useState("");
  const [chosen, setChosen] = useState<ReadonlySet<string>>(new Set());
  const { busy, run } = useBusy(fail);

  useEffect(() => {
    unwrap(client.GET("/v1/event_types"))
      .then((list) => setTypes(list.data))
      .catch(fail);
  }, [client, fail]);

  const toggle = (type: string) =>
    setChosen((previous) => {
      const next = new Set(previous);
      if (next.has(type)) next.delete(type);
      else next.add(type);
      return next;
    });

  const submit = async (event: Event) => {
    event.preventDefault();
    if (chosen.size === 0) {
      fail(new Error("Choose at least one event type."));
      return;
    }
    await run(async () => {
      const created = await unwrap(
        client.POST("/v1/webhook_endpoints", { body: { url: url.trim(), events: [...chosen] } }),
      );
      setUrl("");
      setChosen(new Set());
      announce(`Endpoint ${created.id} created.`);
      onCreated(created);
    });
  };

  return html`<section class="card" aria-labelledby="create-title">
    <h2 id="create-title">Add an endpoint</h2>
    <form data-mutates onSubmit=${submit}>
      <label for="endpoint-url">Endpoint URL</label>
      <input
        id="endpoint-url"
        type="url"
        required
        placeholder="https://example.com/webhooks"
        value=${url}
        onInput=${(e: Event) => setUrl((e.currentTarget as HTMLInputElement).value)}
      />
      <fieldset>
        <legend>Events to send</legend>
        <div class="choices">
          ${types.map(
            (type) => html`<label key=${type.type} class="choice">
              <input
                type="checkbox"
                checked=${chosen.has(type.type)}
                onChange=${() => toggle(type.type)}
              />
              <span>${type.type}</span>
            </label>`,
          )}
        </div>
      </fieldset>
      <button type="submit" disabled=${busy}>Add endpoint</button>
    </form>
  </section>`;
};

const attemptSummary = (attempt: Schemas["WebhookAttempt"]): string =>
  [
    `Attempt ${attempt.number}: ${attempt.status_code === null ? "no answer" : `HTTP ${attempt.status_code}`}`,
    `${attempt.duration_ms} ms`,
    dateTime(attempt.attempted),
  ].join(", ");

const Attempts = ({ delivery }: { readonly delivery: Delivery }) =>
  html`<ol class="attempts">
    ${delivery.attempts.map(
      (attempt) => html`<li key=${attempt.number} class="attempt">
        ${attemptSummary(attempt)}
        ${attempt.error === null ? null : html`<div class="error-text">${attempt.error}</div>`}
        ${
          attempt.response_body === null || attempt.response_body === ""
            ? null
            : html`<div class="muted">Response excerpt:</div><pre class="excerpt">${attempt.response_body}</pre>`
        }
      </li>`,
    )}
  </ol>`;

const Deliveries = ({ deliveries }: { readonly deliveries: readonly Delivery[] | undefined }) => {
  if (deliveries === undefined) return html`<p>Loading deliveries…</p>`;
  if (deliveries.length === 0) return html`<p>No deliveries yet.</p>`;
  return html`<ul class="plain deliveries">
    ${deliveries.map(
      (delivery) => html`<li key=${delivery.id} class="delivery" data-status=${delivery.status}>
        <div>
          <span class=${`badge ${delivery.status}`}>${delivery.status}</span>
          <strong> ${delivery.event_type}</strong>
          <span class="muted"> (${delivery.trigger}) ${delivery.event} · ${dateTime(delivery.created)}</span>
        </div>
        ${
          delivery.next_attempt === null
            ? null
            : html`<div>Next retry: ${dateTime(delivery.next_attempt)}</div>`
        }
        <${Attempts} delivery=${delivery} />
      </li>`,
    )}
  </ul>`;
};

const EndpointCard = ({
  endpoint,
  deliveries,
  busy,
  act,
}: {
  readonly endpoint: Endpoint;
  readonly deliveries: readonly Delivery[] | undefined;
  readonly busy: boolean;
  readonly act: (action: "test" | "rotate" | "toggle" | "delete", endpoint: Endpoint) => void;
}) => {
  const enabled = endpoint.status === "enabled";
  return html`<li class="card endpoint" aria-label=${`Endpoint ${endpoint.url}`}>
    <h3>${endpoint.url}</h3>
    <p class="muted">
      ${endpoint.id} · <span class=${`badge ${endpoint.status}`}>${endpoint.status}</span> · ${endpoint.events.join(", ")}
    </p>
    <div class="actions">
      <button data-mutates type="button" disabled=${busy || !enabled} onClick=${() => act("test", endpoint)}>Send test event</button>
      <button data-mutates type="button" class="secondary" disabled=${busy} onClick=${() => act("rotate", endpoint)}>Rotate secret</button>
      <button data-mutates type="button" class="secondary" disabled=${busy} onClick=${() => act("toggle", endpoint)}>${enabled ? "Disable" : "Enable"}</button>
      <button data-mutates type="button" class="danger" disabled=${busy} onClick=${() => act("delete", endpoint)}>Delete</button>
    </div>
    <h4>Deliveries</h4>
    <${Deliveries} deliveries=${deliveries} />
  </li>`;
};

export const Webhooks = (props: PageProps) => {
  const { client, announce, fail } = props;
  const [endpoints, setEndpoints] = useState<readonly Endpoint[] | null>(null);
  const [deliveries, setDeliveries] = useState<Readonly<Record<string, readonly Delivery[]>>>({});
  const [secret, setSecret] = useState<{ readonly endpoint: string; readonly value: string } | null>(null);
  const { busy, run } = useBusy(fail);

  const read = async () => {
    const list = await unwrap(client.GET("/v1/webhook_endpoints", { params: { query: { limit: 100 } } }));
    setEndpoints(list.data);
    const pages = await Promise.all(
      list.data.map((endpoint) =>
        unwrap(
          client.GET("/v1/webhook_endpoints/{id}/deliveries", {
            params: { path: { id: endpoint.id }, query: { limit: 20 } },
          }),
        ).then((page) => [endpoint.id, page.data] as const),
      ),
    );
    setDeliveries(Object.fromEntries(pages));
  };
  usePolling(() => read().catch(fail), POLL_MS, [client]);

  const act = async (action: "test" | "rotate" | "toggle" | "delete", endpoint: Endpoint) => {
    if (action === "delete" && !window.confirm(`Delete the endpoint ${endpoint.url}?`)) return;
    const path = { params: { path: { id: endpoint.id } } };
    await run(async () => {
      if (action === "test") {
        const sent = await unwrap(client.POST("/v1/webhook_endpoints/{id}/test", { ...path, body: {} }));
        announce(`Test event sent: delivery ${sent.id} is ${sent.status}.`);
      } else if (action === "rotate") {
        const rotated = await unwrap(
          client.POST("/v1/webhook_endpoints/{id}/rotate_secret", { ...path, body: {} }),
        );
        setSecret({ endpoint: rotated.id, value: rotated.secret });
        announce(`Secret of ${rotated.id} rotated. Copy the new one now.`);
      } else if (action === "toggle") {
        const disabled = endpoint.status === "enabled";
        await unwrap(client.POST("/v1/webhook_endpoints/{id}", { ...path, body: { disabled } }));
        announce(`Endpoint ${endpoint.id} ${disabled ? "disabled" : "enabled"}.`);
      } else {
        await unwrap(client.DELETE("/v1/webhook_endpoints/{id}", path));
        announce(`Endpoint ${endpoint.id} deleted.`);
      }
      await read();
    });
  };

  return html`<h1>Webhooks</h1>
    ${secret === null ? null : html`<${SecretOnce} secret=${secret.value} onDone=${() => setSecret(null)} />`}
    <${CreateEndpoint}
      ...${props}
      onCreated=${(created: Schemas["WebhookEndpointWithSecret"]) => {
        setSecret({ endpoint: created.id, value: created.secret });
        void read().catch(fail);
      }}
    />
    <section aria-labelledby="endpoints-title">
      <h2 id="endpoints-title">Endpoints</h2>
      ${
        endpoints === null
          ? html`<p>Loading…</p>`
          : endpoints.length === 0
            ? html`<p>No endpoints yet.</p>`
            : html`<ul class="endpoints">
              ${endpoints.map(
                (endpoint) =>
                  html`<${EndpointCard}
                    key=${endpoint.id}
                    endpoint=${endpoint}
                    deliveries=${deliveries[endpoint.id]}
                    busy=${busy}
                    act=${act}
                  />`,
              )}
            </ul>`
      }
    </section>`;
};
