/** The console's script: renders the app into the page's #app. */
import { html } from "htm/preact";
import { render } from "preact";
import { App } from "./app.ts";

const root = document.getElementById("app");
if (root) {
  root.textContent = "";
  render(html`<${App} />`, root);
}
