/**
 * The fold of children (fold/children.ts F8..F10), the pure pieces of kernel/children.ts (P1..P3)
 * and the wake rows a terminal batch writes (fold/index-changes.ts W1, W2).
 */
import { describe, expect, it } from "vitest";
import { foldAll, type Envelope } from "../src/index.ts";
import { spentWithGrants } from "../src/fold/children.ts";
import { indexChanges } from "../src/fold/index-changes.ts";
import { childIdOf, grantOf, keyProblem } from "../src/kernel/children.ts";

let seq = 0;
const ev = (kind: Envelope["kind"], payload: Envelope["payload"], kernel = false): Envelope => ({
  executionId: "p",
  seq: seq++,
  kind,
  at: 1000 + seq,
  payload,
  ...(kernel ? { meta: { kernel: true } } : {}),
});
const start = (extra: Record<string, unknown> = {}) => {
  seq = 0;
  return ev("EXECUTION_STARTED", {
    flow: "f",
    flowVersion: "1",
    fingerprint: "x",
    schemaVersion: "1.7.0",
    budget: { tokens: 1000 },
    ...(extra as Record<string, never>),
  });
};
const spawn = (i: number, extra: Record<string, unknown> = {}) =>
  ev("CHILD_STARTED", {
    callId: `kid#${i}`,
    scope: "",
    name: "kid",
    childId: `p::kid#${i}`,
    flow: "kid",
    detached: false,
    ...(extra as Record<string, never>),
  });
const done = (i: number, tokens: number, status = "completed") =>
  ev("CHILD_DONE", {
    childId: `p::kid#${i}`,
    outcome: { status, output: i, resources: { tokens: { input: tokens } } },
  });

describe("the fold of children (F8..F10)", () => {
  it("F8, F9: a spawn is recorded once; the first CHILD_DONE settles the slot and adds the spend", () => {
    const s = foldAll([
      start(),
      spawn(0),
      spawn(0),
      ev("SUSPENDED", {
        callId: "awaitChild#0",
        scope: "",
        name: "awaitChild",
        childId: "p::kid#0",
      }),
      done(0, 300),
      done(0, 999),
    ]);
    expect(Object.keys(s._children ?? {})).toEqual(["p::kid#0"]);
    expect(s._children?.["p::kid#0"]?.outcome).toMatchObject({ status: "completed", output: 0 });
    expect(s.frames["awaitChild#0"]).toMatchObject({ kind: "child", status: "settled" });
    expect(s._resources?.tokens?.input).toBe(300);
    expect([s.openWaits, s.status]).toEqual([0, "running"]);
  });

  it("F9: an await after the slot settled is answered at once; a continued outcome settles nothing (P3)", () => {
    const s = foldAll([
      start(),
      spawn(0),
      ev("CHILD_DONE", { childId: "p::kid#0", outcome: { status: "continued" } }),
      done(0, 10),
      ev("SUSPENDED", {
        callId: "awaitChild#0",
        scope: "",
        name: "awaitChild",
        childId: "p::kid#0",
      }),
    ]);
    expect(s.frames["awaitChild#0"]?.status).toBe("settled");
    expect(s.openWaits).toBe(0);
  });

  it("F10: grants count as spent until their slots settle; a detached child's budget is its own", () => {
    const s = foldAll([
      start(),
      spawn(0, { budget: { tokens: 600 }, granted: true }),
      spawn(1, { budget: { tokens: 400 }, granted: true }),
      spawn(2, { budget: { tokens: 50 }, detached: true }),
    ]);
    expect(spentWithGrants(s).tokens?.input).toBe(1000);
    const after = foldAll([
      start(),
      spawn(0, { budget: { tokens: 600 }, granted: true }),
      spawn(1, { budget: { tokens: 400 }, granted: true }),
      done(0, 100),
    ]);
    expect(spentWithGrants(after).tokens?.input).toBe(500);
    expect(grantOf({ tokens: 1000 }, spentWithGrants(after), undefined)).toEqual({ tokens: 500 });
    expect(grantOf({ tokens: 1000 }, spentWithGrants(after), { tokens: 100 })).toEqual({
      tokens: 100,
    });
  });

  it("F9: a CHILD_DONE for a child of an earlier generation records its outcome and no spend", () => {
    const s = foldAll([start(), done(7, 500)]);
    expect(s._children?.["p::kid#7"]).toMatchObject({ callId: "", detached: true });
    expect(s._resources).toBeUndefined();
  });

  it("P1: keys that could make a successor-shaped or ambiguous id are refused", () => {
    expect(childIdOf("chain~1", "g#0")).toBe("chain~1::g#0");
    for (const bad of ["", "a~1", "a::b", "a#1", "-x", "x".repeat(101)]) {
      expect(keyProblem(bad), bad).toBeDefined();
    }
    expect(keyProblem("search.web")).toBeUndefined();
  });
});

describe("wake rows of a terminal batch (W1, W2)", () => {
  it("W1: a spawned execution's end wakes its parent with its chain id; W2: a cancel wakes its open attached children", () => {
    const child = foldAll([
      {
        ...start({ parent: { executionId: "root", callId: "c#0", detached: false } }),
        executionId: "root::c#0~2",
        payload: {
          flow: "f",
          flowVersion: "1",
          fingerprint: "x",
          schemaVersion: "1.7.0",
          chainId: "root::c#0",
          generation: 2,
          continuedFrom: { executionId: "root::c#0~1", carried: {} },
          parent: { executionId: "root", callId: "c#0", detached: false },
        },
      },
    ]);
    const end: Envelope = {
      executionId: "root::c#0~2",
      seq: 1,
      kind: "EXECUTION_COMPLETED",
      at: 5000,
      payload: {},
      meta: { kernel: true },
    };
    expect(indexChanges([end], child)?.wakes).toEqual([
      { executionId: "root", timerId: "child:root::c#0", wakeAtMs: 5000 },
    ]);
    const parent = foldAll([start(), spawn(0), spawn(1), spawn(2, { detached: true }), done(1, 1)]);
    const cancel = ev("EXECUTION_CANCELLED", { reason: "x" }, true);
    expect(indexChanges([cancel], parent)?.wakes).toEqual([
      { executionId: "p::kid#0", timerId: "cascade:p", wakeAtMs: cancel.at },
    ]);
    const completed = ev("EXECUTION_COMPLETED", {}, true);
    expect(indexChanges([completed], parent)?.wakes).toBeUndefined();
  });
});
