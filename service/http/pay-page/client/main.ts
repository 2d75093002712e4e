/** The pay page's script: its view and flow on the hosted pages' shared core, reading the payment every 2 s. */
import { startHostedPage } from "../../hosted-page/client/page-main.ts";
import { httpApi } from "./api.ts";
import { mountView } from "./dom.ts";
import { createFlow } from "./flow.ts";
import { viewModel } from "./view-model.ts";

startHostedPage({
  mount: mountView,
  viewModel,
  createFlow: (token, env, onChange) =>
    createFlow(
      {
        ...env,
        api: httpApi(token),
        randomBytes: (n) => crypto.getRandomValues(new Uint8Array(n)),
        receiptPollMs: 1000,
      },
      onChange,
    ),
  pollMs: 2000,
});
