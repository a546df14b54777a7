/**
 * What an execution's row keeps beside its status (S24: the principal, what was spent) and the
 * list sorted, filtered and paged by key (S25, list-query.ts LQ1..LQ2, list-sql.ts LS1..LS2),
 * including a seeded comparison with a brute-force sort and filter of the same rows, paged
 * through every page.
 */
import { describe, expect, it } from "./vitest.ts";
import type { Envelope, ExecutionStatus } from "../../kernel/events.ts";
import { isLoomError } from "../../kernel/errors.ts";
import type { ExecutionSummary, ListQuery, ListSort, Spent, Store } from "../../store/spi.ts";
import { acquire, batch, expectAllOk, T0, type Harness } from "./helpers.ts";

const at = (id: string, seq: number, atMs: number): Envelope => ({
  executionId: id,
  seq,
  kind: seq === 0 ? "EXECUTION_STARTED" : "STEP_COMPLETED",
  at: atMs,
  payload: { seq },
});

interface Seeded {
  id: string;
  flow: string;
  status: ExecutionStatus;
  principal?: string;
  createdAtMs: number;
  updatedAtMs: number;
  spent?: Spent;
}

/** Starts `x` at its creation time and, if it was updated later, appends a step then. */
async function put(store: Store, x: Seeded): Promise<void> {
  const { fence } = await acquire(store, x.id);
  const alone = x.updatedAtMs === x.createdAtMs && !x.spent;
  const first = batch([at(x.id, 0, x.createdAtMs)], fence, {
    flow: x.flow,
    status: alone ? x.status : "running",
    ...(x.principal === undefined ? {} : { principal: x.principal }),
  });
  expectAllOk(await store.appendMany([first]));
  if (alone) return;
  const next = batch([at(x.id, 1, x.updatedAtMs)], fence, {
    status: x.status,
    principal: "not-the-starter",
    ...(x.spent ? { spent: x.spent } : {}),
  });
  expectAllOk(await store.appendMany([next]));
}

export function listSortedSuite(h: Harness): void {
  describe("list: principal and spent (S24), sorted and filtered by key (S25)", () => {
    spentTests(h);
    filterTests(h);
    seededTests(h);
  });
}

function spentTests(h: Harness): void {
  it("S24: keeps the principal of sequence 0 and the latest spent a batch carried", async () => {
    const store = await h.open();
    const { fence } = await acquire(store, "s-1");
    const b0 = batch([at("s-1", 0, T0)], fence, {
      principal: "alice",
      spent: { costUsd: 0.25, tokens: 10 },
    });
    expectAllOk(await store.appendMany([b0]));
    const row = async () => (await store.list()).find((x) => x.executionId === "s-1");
    expect(await row()).toMatchObject({ principal: "alice", costUsd: 0.25, tokens: 10 });
    expect((await row())?.costUnknown).toBeUndefined();
    // A batch without spent leaves it; its principal is not sequence 0's and is ignored.
    const b1 = batch([at("s-1", 1, T0 + 5)], fence, { principal: "mallory" });
    expectAllOk(await store.appendMany([b1]));
    expect(await row()).toMatchObject({ principal: "alice", costUsd: 0.25, tokens: 10 });
    const spent: Spent = { costUsd: 0.75, costUnknown: true, tokens: 30 };
    const b2 = batch([at("s-1", 2, T0 + 9)], fence, { spent, status: "completed" });
    expectAllOk(await store.appendMany([b2]));
    expect(await row()).toMatchObject({ principal: "alice", ...spent, updatedAtMs: T0 + 9 });
    // Two batches of one call: the later one's spent stands.
    const { fence: f2 } = await acquire(store, "s-2");
    const c0 = batch([at("s-2", 0, T0)], f2, { spent: { costUsd: 1 } });
    const c1 = batch([at("s-2", 1, T0 + 1)], f2, { spent: { costUsd: 2, tokens: 3 } });
    expectAllOk(await store.appendMany([c0, c1]));
    const s2 = (await store.list()).find((x) => x.executionId === "s-2");
    expect(s2).toMatchObject({ costUsd: 2, tokens: 3 });
    expect(s2?.principal).toBeUndefined();
  });

  it("S24: a refused batch changes no spent", async () => {
    const store = await h.open();
    const { fence } = await acquire(store, "r-1");
    expectAllOk(await store.appendMany([batch([at("r-1", 0, T0)], fence)]));
    const stale = batch([at("r-1", 1, T0 + 1)], fence + 1, { spent: { costUsd: 9 } });
    const [outcome] = await store.appendMany([stale]);
    expect(outcome?.ok).toBe(false);
    expect((await store.list())[0]?.costUsd).toBeUndefined();
  });
}

function filterTests(h: Harness): void {
  it("S25, LQ2: filters by principal, minimum cost (none counts as 0) and creation time", async () => {
    const store = await h.open();
    const rows: Seeded[] = [
      { id: "f-1", flow: "a", status: "running", createdAtMs: 100, updatedAtMs: 100 },
      {
        id: "f-2",
        flow: "a",
        status: "completed",
        principal: "bob",
        createdAtMs: 200,
        updatedAtMs: 250,
        spent: { costUsd: 0.5 },
      },
      {
        id: "f-3",
        flow: "b",
        status: "failed",
        principal: "alice",
        createdAtMs: 300,
        updatedAtMs: 300,
        spent: { tokens: 5 },
      },
    ];
    for (const x of rows) await put(store, x);
    const ids = async (q: ListQuery) => (await store.list(q)).map((x) => x.executionId);
    expect(await ids({ principal: "bob" })).toEqual(["f-2"]);
    expect(await ids({ principal: "not-the-starter" })).toEqual([]);
    expect(await ids({ minCostUsd: 0 })).toEqual(["f-1", "f-2", "f-3"]);
    expect(await ids({ minCostUsd: 0.5 })).toEqual(["f-2"]);
    expect(await ids({ minCostUsd: 0.51 })).toEqual([]);
    expect(await ids({ createdFromMs: 200 })).toEqual(["f-2", "f-3"]);
    expect(await ids({ createdToMs: 200 })).toEqual(["f-1"]);
    expect(await ids({ createdFromMs: 150.5, createdToMs: 300.5 })).toEqual(["f-2", "f-3"]);
    expect(await ids({ sort: "cost", order: "desc" })).toEqual(["f-2", "f-3", "f-1"]);
    expect(await ids({ sort: "updated", order: "desc", limit: 2 })).toEqual(["f-3", "f-2"]);
    expect(await ids({ sort: "id", order: "desc", afterId: "f-3" })).toEqual(["f-2", "f-1"]);
    // A cursor names a place in the order, not a row: one deleted since still pages on.
    await store.deleteExecution("f-2");
    expect(await ids({ sort: "cost", order: "desc", afterKey: 0.5, afterId: "f-2" })).toEqual([
      "f-3",
      "f-1",
    ]);
  });

  it("LQ1: a malformed query is InvalidInputError, whatever the store", async () => {
    const store = await h.open();
    const bad: unknown[] = [
      { sort: "bogus" },
      { order: "up" },
      { minCostUsd: Number.NaN },
      { minCostUsd: -1 },
      { createdFromMs: Infinity },
      { sort: "cost", afterId: "x" },
      { sort: "created", afterId: "x", afterKey: 1.5 },
    ];
    for (const q of bad) {
      const e = await store.list(q as ListQuery).catch((err: unknown) => err);
      expect(isLoomError(e, "LOOM_INVALID_INPUT"), JSON.stringify(q)).toBe(true);
    }
  });
}

/** A small seeded generator (mulberry32): the same seed, the same rows. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function seededRows(seed: number, n: number): Seeded[] {
  const r = random(seed);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(r() * xs.length)] as T;
  const costs = [undefined, 0, 0.001, 0.5, 0.5, 2.25, 1e-9];
  return Array.from({ length: n }, (_, i) => {
    // Few distinct times and costs: many ties, broken by the id.
    const createdAtMs = T0 + Math.floor(r() * 6) * 100;
    const x: Seeded = {
      id: `k-${pick(["a", "b", "c"])}${String(i).padStart(3, "0")}`,
      flow: pick(["alpha", "beta"]),
      status: pick<ExecutionStatus>(["running", "completed", "failed"]),
      createdAtMs,
      updatedAtMs: createdAtMs + pick([0, 0, 50, 700]),
    };
    const principal = pick([undefined, "alice", "bob"]);
    if (principal !== undefined) x.principal = principal;
    const costUsd = pick(costs);
    if (costUsd !== undefined) x.spent = { costUsd, tokens: Math.floor(r() * 100) };
    return x;
  });
}

/** The brute force: every row admitted by `q`'s filters, sorted by its key and id. */
function bruteForce(rows: readonly Seeded[], q: ListQuery): string[] {
  const key = (x: Seeded): number =>
    q.sort === "created"
      ? x.createdAtMs
      : q.sort === "updated"
        ? x.updatedAtMs
        : q.sort === "cost"
          ? (x.spent?.costUsd ?? 0)
          : 0;
  const admitted = rows.filter(
    (x) =>
      (q.status === undefined || q.status.includes(x.status)) &&
      (q.flow === undefined || x.flow === q.flow) &&
      (q.idPrefix === undefined || x.id.startsWith(q.idPrefix)) &&
      (q.principal === undefined || x.principal === q.principal) &&
      (q.minCostUsd === undefined || (x.spent?.costUsd ?? 0) >= q.minCostUsd) &&
      (q.createdFromMs === undefined || x.createdAtMs >= q.createdFromMs) &&
      (q.createdToMs === undefined || x.createdAtMs < q.createdToMs),
  );
  const sign = q.order === "desc" ? -1 : 1;
  admitted.sort((a, b) => sign * (key(a) - key(b) || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)));
  return admitted.map((x) => x.id);
}

/** Every page of `q` at `limit`, each from the last row of the one before (S25). */
async function allPages(store: Store, q: ListQuery, limit: number): Promise<string[]> {
  const out: string[] = [];
  let last: ExecutionSummary | undefined;
  for (let pages = 0; pages < 1000; pages++) {
    const page = await store.list({
      ...q,
      limit,
      ...(last ? { afterId: last.executionId, afterKey: keyOf(last, q.sort) } : {}),
    });
    out.push(...page.map((x) => x.executionId));
    if (page.length < limit) return out;
    last = page[page.length - 1];
  }
  throw new Error("conformance: paging did not end");
}

function keyOf(x: ExecutionSummary, sort: ListSort | undefined): number {
  if (sort === "created") return x.createdAtMs;
  if (sort === "updated") return x.updatedAtMs;
  if (sort === "cost") return x.costUsd ?? 0;
  return 0;
}

function seededTests(h: Harness): void {
  it("S25, LS2: every sort, order and filter, paged through, is the brute force's order (seeded)", async () => {
    const seed = Number(process.env.LOOM_LIST_SEED ?? 0x25a4);
    const rows = seededRows(seed, 36);
    const store = await h.open();
    for (const x of rows) await put(store, x);
    const filters: ListQuery[] = [
      {},
      { principal: "alice" },
      { minCostUsd: 0.001 },
      { createdFromMs: T0 + 100, createdToMs: T0 + 400 },
      { flow: "beta", status: ["running", "failed"] },
      { idPrefix: "k-b", minCostUsd: 0 },
    ];
    for (const sort of ["id", "created", "updated", "cost"] as const) {
      for (const order of ["asc", "desc"] as const) {
        for (const f of filters) {
          const q: ListQuery = { ...f, sort, order };
          const want = bruteForce(rows, q);
          const why = `seed ${seed} (LOOM_LIST_SEED), query ${JSON.stringify(q)}`;
          expect(await allPages(store, q, 5), why).toEqual(want);
          expect(
            (await store.list(q)).map((x) => x.executionId),
            why,
          ).toEqual(want);
        }
      }
    }
  });
}
