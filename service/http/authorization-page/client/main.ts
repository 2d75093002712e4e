/** The authorization page's script: wires the flow to the page, the wallet and the service. */

import { closeDelayFromQuery } from "../../hosted-page/client/close-option.ts";
import type { Eip1193Provider } from "../../hosted-page/client/wallet.ts";
import { httpApi } from "./api.ts";
import { mountView } from "./dom.ts";
import { createFlow, type Flow } from "./flow.ts";
import { viewModel } from "./view-model.ts";

const root = document.getElementById("app");
const token = root?.dataset.token;
if (root && token) {
  let flow: Flow | null = null;
  const view = mountView(root, (action) => {
    if (flow === null) return;
    if (action === "connect") void flow.connect();
    else if (action === "authorize") void flow.authorize();
    else if (action === "retry") void flow.retry();
    else flow.keepOpen();
  });
  flow = createFlow(
    {
      api: httpApi(token),
      provider: () => (window as { ethereum?: Eip1193Provider }).ethereum ?? null,
      sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
      closeWindow: () => window.close(),
      pollIntervalMs: 500,
      closeDelay: closeDelayFromQuery(window.location.search),
    },
    (state) => view.render(viewModel(state)),
  );
  view.render(viewModel(flow.state()));
  void flow.load();
}
