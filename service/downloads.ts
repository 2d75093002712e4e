/**
 * Downloads of any length (CSV or JSON exports), streamed a page at a time: the HTTP layer asks a
 * `Download` for its next chunk as the client reads, each chunk one short keyset statement, so memory
 * stays flat and no database cursor is held between chunks. A download that fails midway ends the
 * response without its last chunk (the client sees a truncated transfer, never a short file that
 * looks whole).
 */
import { Effect } from "effect";
import type { SqlError } from "effect/sql";
import type { InvalidRequest } from "./errors.ts";

export interface Download<R> {
  readonly contentType: string;
  /** The name a browser saves it under. */
  readonly filename: string;
  /** The next piece of the body; undefined when there is no more. */
  readonly next: Effect.Effect<string | undefined, InvalidRequest | SqlError.SqlError, R>;
}

/** Rows a download reads per statement. */
export const DOWNLOAD_PAGE = 1000;

export const DOWNLOAD_FORMATS = ["csv", "json"] as const;
export type DownloadFormat = (typeof DOWNLOAD_FORMATS)[number];

/** One page of rows read after a cursor, with the cursor after them and whether more may follow. */
export interface DownloadPage<A, C> {
  readonly rows: ReadonlyArray<A>;
  readonly after: C | undefined;
  readonly more: boolean;
}

/**
 * A download of every row `page` reads, page after page from the start: CSV (`columns` as the header
 * line, `csv` per row) or a JSON array (`json` per row, the API's objects).
 */
export const pagedDownload = <A, C, R>(options: {
  readonly format: DownloadFormat;
  readonly name: string;
  readonly columns: ReadonlyArray<string>;
  readonly csv: (row: A) => ReadonlyArray<string | number | boolean | null>;
  readonly json: (row: A) => unknown;
  readonly page: (
    after: C | undefined,
  ) => Effect.Effect<DownloadPage<A, C>, InvalidRequest | SqlError.SqlError, R>;
}): Download<R> => {
  let after: C | undefined;
  let started = false;
  let done = false;
  let written = 0;
  const csv = options.format === "csv";
  return {
    contentType: csv ? "text/csv; charset=utf-8" : "application/json",
    filename: `${options.name}.${options.format}`,
    next: Effect.suspend(() => {
      if (done) return Effect.succeed(undefined);
      return Effect.map(options.page(after), (page) => {
        const head = started ? "" : csv ? csvLine(options.columns) : "[";
        started = true;
        after = page.after;
        done = !page.more || page.rows.length === 0;
        const body = csv
          ? page.rows.map((row) => csvLine(options.csv(row))).join("")
          : page.rows
              .map((row, i) => `${written + i === 0 ? "" : ","}${JSON.stringify(options.json(row))}`)
              .join("");
        written += page.rows.length;
        return `${head}${body}${done && !csv ? "]" : ""}`;
      });
    }),
  };
};

/** One CSV field as RFC 4180 writes it: quoted when it holds a comma, a quote or a line break. */
export const csvField = (value: string | number | boolean | null | undefined): string => {
  const text = value === null || value === undefined ? "" : String(value);
  return /[",\r\n]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
};

/** A CSV line (CRLF, as RFC 4180 has it). */
export const csvLine = (fields: ReadonlyArray<string | number | boolean | null | undefined>): string =>
  `${fields.map(csvField).join(",")}\r\n`;

/** Unix seconds as ISO 8601 UTC, to the second (2026-11-29T04:40:00Z). */
export const isoSeconds = (unixSeconds: number): string =>
  new Date(unixSeconds * 1000).toISOString().replace(/\.\d{3}Z$/, "Z");
