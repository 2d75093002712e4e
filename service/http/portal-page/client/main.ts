/** The portal page's script: its view and flow on the hosted pages' shared core. */
import { startHostedPage } from "../../hosted-page/client/page-main.ts";
import { httpApi } from "./api.ts";
import { mountView } from "./dom.ts";
import { createFlow } from "./flow.ts";
import { viewModel } from "./view-model.ts";

startHostedPage({
  mount: mountView,
  viewModel,
  createFlow: (token, env, onChange) =>
    createFlow({ ...env, api: httpApi(token), pollIntervalMs: 1000, confirmPolls: 60 }, onChange),
});
