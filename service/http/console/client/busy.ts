/** A page's action in flight: `busy` disables its controls while it runs; a failure goes to `fail`. */
import { useState } from "preact/hooks";

export const useBusy = (fail: (error: unknown) => void) => {
  const [busy, setBusy] = useState(false);
  const run = async (action: () => Promise<void>): Promise<void> => {
    setBusy(true);
    try {
      await action();
    } catch (error) {
      fail(error);
    } finally {
      setBusy(false);
    }
  };
  return { busy, run };
};
