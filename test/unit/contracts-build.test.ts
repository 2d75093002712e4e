import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { abisUpToDate, compileContracts, renderArtifact } from "../../scripts/contracts/compile.ts";

describe("generated ABIs", () => {
  it("are reproducible: a fresh compile equals what is committed in abis/", () => {
    expect(abisUpToDate()).toBe(true);
    for (const artifact of compileContracts()) {
      expect(readFileSync(`abis/${artifact.name}.ts`, "utf8"), artifact.name).toBe(renderArtifact(artifact));
    }
  });
});
