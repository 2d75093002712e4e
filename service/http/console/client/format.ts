/** Small display helpers shared by the pages. */
export const dateTime = (unixSeconds: number): string =>
  new Date(unixSeconds * 1000)
    .toISOString()
    .replace("T", " ")
    .replace(/\.\d+Z$/, " UTC");

export const yesNo = (flag: boolean): string => (flag ? "yes" : "no");

export const messageOf = (error: unknown): string =>
  error instanceof Error ? error.message : "Something went wrong.";
