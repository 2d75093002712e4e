/**
 * What a page shows for its current inputs: null while the first read for them is in flight, then the
 * answer. An answer that arrives after the inputs changed (or the page went away) is dropped: reads are not
 * answered in order, and a slow read for "All statuses" must not replace the chosen status's list.
 */
import { useCallback, useEffect, useRef, useState } from "preact/hooks";

export const useLoaded = <T>(
  load: () => Promise<T>,
  fail: (error: unknown) => void,
  inputs: readonly unknown[],
): { readonly value: T | null; readonly reload: () => void } => {
  const [value, setValue] = useState<T | null>(null);
  const latest = useRef(load);
  latest.current = load;
  const generation = useRef(0);

  const reload = useCallback(() => {
    const mine = ++generation.current;
    latest.current().then(
      (answer) => {
        if (generation.current === mine) setValue(answer);
      },
      (error: unknown) => {
        if (generation.current === mine) fail(error);
      },
    );
  }, [fail]);

  useEffect(() => {
    setValue(null);
    reload();
    return () => {
      generation.current++;
    };
  }, [reload, ...inputs]);

  return { value, reload };
};
