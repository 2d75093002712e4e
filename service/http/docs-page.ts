/** A readable API reference at /docs, rendered on the server from the OpenAPI document (no CDN, no script). */

type Json = Record<string, unknown>;

const escapeHtml = (text: string) =>
  text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");

const resolve = (schema: unknown, components: Json): Json => {
  const ref = (schema as Json | undefined)?.$ref;
  if (typeof ref === "string")
    return resolve(components[ref.replace("#/components/schemas/", "")], components);
  return (schema as Json | undefined) ?? {};
};

const typeOf = (schema: Json, components: Json): string => {
  const s = resolve(schema, components);
  if (Array.isArray(s.enum)) return s.enum.map((v) => JSON.stringify(v)).join(" | ");
  if (s.type === "array") return `array of ${typeOf(s.items as Json, components)}`;
  if (Array.isArray(s.anyOf)) return s.anyOf.map((m) => typeOf(m as Json, components)).join(" | ");
  const ref = (schema as Json).$ref;
  if (typeof ref === "string") return ref.replace("#/components/schemas/", "");
  return String(s.type ?? "any");
};

const fieldsTable = (schema: unknown, components: Json): string => {
  const s = resolve(schema, components);
  const properties = (s.properties ?? {}) as Record<string, Json>;
  const required = new Set((s.required ?? []) as string[]);
  const rows = Object.entries(properties).map(
    ([name, prop]) =>
      `<tr><td><code>${escapeHtml(name)}</code>${required.has(name) ? "" : " <small>optional</small>"}</td><td>${escapeHtml(
        typeOf(prop, components),
      )}</td><td>${escapeHtml(String(resolve(prop, components).description ?? prop.description ?? ""))}</td></tr>`,
  );
  if (rows.length === 0) return "<p><small>Empty object <code>{}</code>.</small></p>";
  return `<table><thead><tr><th>Field</th><th>Type</th><th>Description</th></tr></thead><tbody>${rows.join("")}</tbody></table>`;
};

export const renderDocsPage = (openapi: Json): string => {
  const components = ((openapi.components as Json)?.schemas ?? {}) as Json;
  const info = openapi.info as Json;
  const operations: string[] = [];
  for (const [path, item] of Object.entries(openapi.paths as Record<string, Record<string, Json>>)) {
    for (const [method, op] of Object.entries(item)) {
      const responses = op.responses as Record<string, Json>;
      const success = Object.entries(responses).find(([status]) => status.startsWith("2"));
      const body = (op.requestBody as Json | undefined)?.content as Json | undefined;
      const bodySchema = (body?.["application/json"] as Json | undefined)?.schema;
      const successSchema = (
        (success?.[1].content as Json | undefined)?.["application/json"] as Json | undefined
      )?.schema;
      operations.push(`<section id="${escapeHtml(String(op.operationId))}">
  <h3><span class="method ${method}">${method.toUpperCase()}</span> <code>${escapeHtml(path)}</code></h3>
  <p>${escapeHtml(String(op.summary ?? ""))}</p>${op.description ? `<p>${escapeHtml(String(op.description))}</p>` : ""}
  ${bodySchema ? `<h4>Request body</h4>${fieldsTable(bodySchema, components)}` : ""}
  ${successSchema ? `<h4>Response ${escapeHtml(success?.[0] ?? "")}</h4>${fieldsTable(successSchema, components)}` : ""}
  <h4>Errors</h4><ul>${Object.entries(responses)
    .filter(([status]) => !status.startsWith("2"))
    .map(([status, r]) => `<li><b>${status}</b> ${escapeHtml(String(r.description ?? ""))}</li>`)
    .join("")}</ul>
</section>`);
    }
  }
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(String(info.title))}</title>
<style>
body{font:15px/1.5 system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#1a1a1a}
code{font:13px ui-monospace,monospace;background:#f3f3f3;padding:1px 4px;border-radius:3px}
section{border-top:1px solid #ddd;padding:.5rem 0 1rem}
table{border-collapse:collapse;width:100%}td,th{border:1px solid #ddd;padding:4px 8px;text-align:left;vertical-align:top}
.method{font:bold 12px ui-monospace,monospace;padding:2px 6px;border-radius:3px;color:#fff}
.get{background:#0a7d32}.post{background:#1f5fbf}.delete{background:#b3261e}
</style></head>
<body><h1>${escapeHtml(String(info.title))}</h1>
<p>${escapeHtml(String(info.description ?? ""))}</p>
<p>Authenticate with <code>Authorization: Bearer sk_test_…</code>. Errors always have the shape
<code>{"error":{"type","code","message","param"}}</code>. The machine-readable document is at
<a href="/v1/openapi.json"><code>/v1/openapi.json</code></a>.</p>
${operations.join("\n")}
</body></html>`;
};
