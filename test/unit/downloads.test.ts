/**
 * Downloads (service/downloads.ts), checked from the formats' rules: whatever the rows hold (commas,
 * quotes, line breaks) and however the pages split them, the CSV reads back, by an RFC 4180 reader
 * written here, as the header and exactly the rows; the JSON is one array of exactly the rows; and the
 * download stops asking for pages after the last.
 */
import { Effect } from "effect";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { csvField, isoSeconds, pagedDownload } from "../../service/downloads.ts";

/** RFC 4180: fields separated by commas, records by CRLF; a quoted field may hold anything, "" is a quote. */
const readCsv = (text: string): string[][] => {
  const records: string[][] = [];
  let record: string[] = [];
  let field = "";
  let i = 0;
  while (i < text.length) {
    if (text[i] === '"') {
      i++;
      for (;;) {
        if (text[i] === '"' && text[i + 1] === '"') {
          field += '"';
          i += 2;
        } else if (text[i] === '"') {
          i++;
          break;
        } else field += text[i++];
      }
    } else if (text[i] === ",") {
      record.push(field);
      field = "";
      i++;
    } else if (text[i] === "\r" || text[i] === "\n") {
      // As common readers do, a bare CR or LF ends a record too: only a quoted field may hold one.
      record.push(field);
      records.push(record);
      record = [];
      field = "";
      i += text.startsWith("\r\n", i) ? 2 : 1;
    } else field += text[i++];
  }
  expect(field).toBe("");
  expect(record).toEqual([]);
  return records;
};

const drain = async (next: Effect.Effect<string | undefined, unknown>) => {
  let body = "";
  for (;;) {
    const chunk = await Effect.runPromise(next);
    if (chunk === undefined) return body;
    body += chunk;
  }
};

const rowsAndPages = fc
  .array(
    fc.tuple(
      fc.string({ unit: "binary" }),
      fc.integer(),
      fc.constantFrom("a,b", 'say "hi"', "line\r\nbreak", "lone\nbreak", "cr\ronly", ""),
    ),
    {
      maxLength: 40,
    },
  )
  .chain((rows) => fc.tuple(fc.constant(rows), fc.integer({ min: 1, max: 7 })));

const downloadOf = (
  rows: ReadonlyArray<readonly [string, number, string]>,
  size: number,
  format: "csv" | "json",
) => {
  let reads = 0;
  const download = pagedDownload({
    format,
    name: "things",
    columns: ["text", "number", "tricky"],
    csv: (row: readonly [string, number, string]) => [...row],
    json: (row: readonly [string, number, string]) => ({ text: row[0], number: row[1], tricky: row[2] }),
    page: (after: number | undefined) =>
      Effect.sync(() => {
        reads++;
        const from = after ?? 0;
        const page = rows.slice(from, from + size);
        return { rows: page, after: from + page.length, more: page.length === size };
      }),
  });
  return { download, reads: () => reads };
};

describe("downloads", () => {
  it("CSV reads back as the header and exactly the rows, however they are paged", async () => {
    await fc.assert(
      fc.asyncProperty(rowsAndPages, async ([rows, size]) => {
        const { download, reads } = downloadOf(rows, size, "csv");
        expect(download.contentType).toBe("text/csv; charset=utf-8");
        expect(download.filename).toBe("things.csv");
        const records = readCsv(await drain(download.next));
        expect(records).toEqual([
          ["text", "number", "tricky"],
          ...rows.map((r) => [r[0], String(r[1]), r[2]]),
        ]);
        // One read past a full last page at most, and never again once done.
        expect(reads()).toBeLessThanOrEqual(Math.floor(rows.length / size) + 1);
        expect(await Effect.runPromise(download.next)).toBeUndefined();
        expect(reads()).toBeLessThanOrEqual(Math.floor(rows.length / size) + 1);
      }),
      { numRuns: 200 },
    );
  });

  it("JSON is one array of exactly the rows", async () => {
    await fc.assert(
      fc.asyncProperty(rowsAndPages, async ([rows, size]) => {
        const { download } = downloadOf(rows, size, "json");
        expect(download.contentType).toBe("application/json");
        expect(JSON.parse(await drain(download.next))).toEqual(
          rows.map(([text, number, tricky]) => ({ text, number, tricky })),
        );
      }),
      { numRuns: 200 },
    );
  });

  it("quotes only what needs it, and writes times as ISO 8601 UTC to the second", () => {
    expect(csvField("0xabc")).toBe("0xabc");
    expect(csvField(-1000001)).toBe("-1000001");
    expect(csvField(null)).toBe("");
    expect(csvField('a"b')).toBe('"a""b"');
    expect(csvField("x\ny")).toBe('"x\ny"');
    expect(isoSeconds(0)).toBe("1970-01-01T00:00:00Z");
    expect(isoSeconds(1_796_079_600)).toBe("2026-11-30T23:00:00Z");
  });
});
