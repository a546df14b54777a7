/**
 * STYLE 6: golden logs written by earlier schema versions replay forever. Each file under
 * test/fixtures/logs/ holds a log and the state its version folded it to; the current fold must
 * give the same state, byte for byte. A fold change that breaks one is a new schema version.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { canonicalJson, foldAll, type Envelope } from "../src/index.ts";

const dir = join(import.meta.dirname, "fixtures", "logs");
const files = readdirSync(dir).filter((f) => f.endsWith(".json"));

describe("golden logs", () => {
  it("there is at least one golden log", () => {
    expect(files.length).toBeGreaterThan(0);
  });
  for (const file of files) {
    it(`D8 (7), (8): ${file} folds to its recorded state`, () => {
      const golden = JSON.parse(readFileSync(join(dir, file), "utf8")) as {
        events: Envelope[];
        state: unknown;
        /** Since 1.5.0: the successor generations of the same chain. */
        chain?: { id: string; events: Envelope[]; state: unknown }[];
        /** Since 1.9.0: other executions' logs (a run stopped mid-call and recovered). */
        others?: { id: string; events: Envelope[]; state: unknown }[];
      };
      expect(canonicalJson(foldAll(golden.events))).toBe(canonicalJson(golden.state));
      for (const g of [...(golden.chain ?? []), ...(golden.others ?? [])]) {
        expect(canonicalJson(foldAll(g.events)), g.id).toBe(canonicalJson(g.state));
      }
    });
  }
});
