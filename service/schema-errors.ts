import { type Schema, SchemaIssue } from "effect";

export interface FieldIssue {
  /** Dotted path of the offending field, e.g. `tokens[0].address`; empty for the whole value. */
  readonly param: string;
  readonly kind: "missing" | "unknown" | "invalid";
  readonly message: string;
}

const formatter = SchemaIssue.makeFormatterStandardSchemaV1();

const renderPath = (path: ReadonlyArray<PropertyKey>): string =>
  path.reduce<string>(
    (acc, key) =>
      typeof key === "number" ? `${acc}[${key}]` : acc === "" ? String(key) : `${acc}.${String(key)}`,
    "",
  );

const collect = (issue: SchemaIssue.Issue, path: ReadonlyArray<PropertyKey>, out: FieldIssue[]): void => {
  switch (issue._tag) {
    case "Pointer":
      collect(issue.issue, [...path, ...issue.path], out);
      return;
    case "Composite":
      for (const child of issue.issues) collect(child, path, out);
      return;
    case "Encoding":
      collect(issue.issue, path, out);
      return;
    default: {
      const kind =
        issue._tag === "MissingKey" ? "missing" : issue._tag === "UnexpectedKey" ? "unknown" : "invalid";
      for (const formatted of formatter(issue).issues) {
        const extra = (formatted.path ?? []).map((segment) =>
          typeof segment === "object" ? segment.key : segment,
        );
        out.push({ param: renderPath([...path, ...extra]), kind, message: formatted.message });
      }
    }
  }
};

/** Flattens a schema decoding error into one entry per offending field. */
export const schemaErrorIssues = (error: Schema.SchemaError): FieldIssue[] => {
  const out: FieldIssue[] = [];
  collect(error.issue, [], out);
  return out;
};

export const formatSchemaError = (error: Schema.SchemaError): string =>
  schemaErrorIssues(error)
    .map((issue) => (issue.param === "" ? issue.message : `${issue.param}: ${issue.message}`))
    .join("; ");
