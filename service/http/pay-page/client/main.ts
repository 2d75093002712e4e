/** The pay page's script: wires the flow to the page, the wallet, the service and the clock. */
import { closeDelayFromQuery } from "../../hosted-page/client/close-option.ts";
import type { Eip1193Provider } from "../../hosted-page/client/wallet.ts";
import { httpApi } from "./api.ts";
import { mountView } from "./dom.ts";
import { createFlow, type Flow } from "./flow.ts";
import { viewModel } from "./view-model.ts";

/** How often the page reads the payment's status. */
const POLL_MS = 2000;

const root = document.getElementById("app");
const token = root?.dataset.token;
if (root && token) {
  let flow: Flow | null = null;
  const view = mountView(root, (action) => {
    if (flow === null) return;
    if (action === "pay_gasless") void flow.payGasless();
    else if (action === "pay_transfer") void flow.payTransfer();
    else if (action === "retry") void flow.retry();
    else flow.keepOpen();
  });
  const started = createFlow(
    {
      api: httpApi(token),
      provider: () => (window as { ethereum?: Eip1193Provider }).ethereum ?? null,
      sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
      now: () => Date.now() / 1000,
      randomBytes: (n) => crypto.getRandomValues(new Uint8Array(n)),
      closeWindow: () => window.close(),
      receiptPollMs: 1000,
      closeDelay: closeDelayFromQuery(window.location.search),
    },
    (state) => view.render(viewModel(state)),
  );
  flow = started;
  view.render(viewModel(started.state()));
  void started.load().then(() => {
    setInterval(() => started.tick(), 1000);
    // One read at a time: the next starts 2 s after the previous answered.
    const poll = () => void started.poll().finally(() => setTimeout(poll, POLL_MS));
    setTimeout(poll, POLL_MS);
  });
}
