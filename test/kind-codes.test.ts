/** The event kinds' codes both SQL stores keep (src/store/kind-codes.ts KC1). */
import { describe, expect, it } from "vitest";
import { EVENT_KINDS } from "../src/kernel/events.ts";
import { KIND_CODES, kindCode, kindOfCode } from "../src/store/kind-codes.ts";

describe("kind codes (KC1)", () => {
  it("every kernel kind has a code, so no store row falls back to a kind's name", () => {
    for (const k of EVENT_KINDS) expect(kindCode(k), k).toBeDefined();
  });

  it("codes are unique, read back as their kind, and none past the list is a kind", () => {
    expect(new Set(KIND_CODES).size).toBe(KIND_CODES.length);
    KIND_CODES.forEach((k, i) => {
      expect(kindCode(k)).toBe(i);
      expect(kindOfCode(i)).toBe(k);
    });
    expect(kindOfCode(KIND_CODES.length)).toBeUndefined();
    expect(kindCode("NOT_A_KIND")).toBeUndefined();
  });

  it("the codes rows were written with keep their places (append only)", () => {
    expect(KIND_CODES.slice(0, 3)).toEqual(["EXECUTION_STARTED", "STEP_STARTED", "STEP_COMPLETED"]);
    expect(KIND_CODES[16]).toBe("EXECUTION_COMPLETED");
    expect(KIND_CODES[21]).toBe("SUBJECT_ERASED");
  });
});
