/**
 * Issue 10's acceptance, on a real store: the audit chain detects a flipped byte, a deleted event
 * and two swapped events, naming the first bad sequence (trust/verify.ts K1..K3); with the codec
 * on, a secret's plaintext is nowhere in the store's bytes, replay works and old events open after
 * a key rotation (codec.ts C1); after eraseSubject the subject's data cannot be recovered, each
 * log still folds and verifies, and the erasure is in it (erase-subject.ts X1..X4).
 *
 * `trustSuite` runs against any backend that can open a store over the same data again, change
 * rows behind the store's back, and dump every byte the store holds.
 */
import { randomBytes, randomUUID } from "node:crypto";
import { afterEach, describe, expect, it } from "vitest";
import {
  aesGcmCodec,
  createRuntime,
  flow$,
  isLoomError,
  type Envelope,
  type Runtime,
  type RuntimeOptions,
  type Store,
} from "../../src/index.ts";
import { loadState } from "../../src/runtime/load-state.ts";
import { until } from "../helpers.ts";

/** One stored event row as the backend holds it. */
export interface RawRow {
  kind: string;
  at: number;
  payload: string;
  meta: string | null;
}

export interface TrustBackend {
  name: string;
  /** A store over this test's data (the same data every call within a test). */
  open(): Promise<Store>;
  /** Reads and writes event rows behind the store's back (a tamperer). */
  row(id: string, seq: number): Promise<RawRow | undefined>;
  setRow(id: string, seq: number, row: RawRow): Promise<void>;
  deleteRow(id: string, seq: number): Promise<void>;
  /** Every byte the store keeps (files, or every table's rows as text). */
  dump(): Promise<Buffer>;
  /** A new, empty data set for the next test. */
  reset(): Promise<void>;
}

const KEY1 = randomBytes(32);
const KEY2 = randomBytes(32);

export function trustSuite(backend: TrustBackend): void {
  describe(`trust on ${backend.name}`, () => {
    const open: Runtime[] = [];
    afterEach(async () => {
      await Promise.all(open.splice(0).map((r) => r.close()));
      await backend.reset();
    });
    async function runtime(opts: Partial<RuntimeOptions> = {}): Promise<Runtime> {
      const r = createRuntime({
        store: await backend.open(),
        pollIntervalMs: 20,
        features: { continueAsNew: true },
        ...opts,
      });
      open.push(r);
      r.registerFlow(agent).registerFlow(chat).registerFlow(helper);
      return r;
    }

    it("K1..K3: a flipped byte, a deleted event and two swapped events are found at the first bad sequence", async () => {
      const r = await runtime({ audit: true });
      for (const id of ["flip", "gone", "swap"]) {
        await (await r.start("agent", { secret: "s", steps: 6 }, { id })).result();
        expect(await r.verifyLog(id)).toMatchObject({ ok: true, events: 8 });
      }
      await flipByte(backend, "flip", 4);
      await backend.deleteRow("gone", 3);
      const a = (await backend.row("swap", 5)) as RawRow;
      const b = (await backend.row("swap", 6)) as RawRow;
      await backend.setRow("swap", 5, b);
      await backend.setRow("swap", 6, a);
      const fresh = await runtime({ audit: true });
      expect(await fresh.verifyLog("flip")).toMatchObject({ ok: false, firstBadSeq: 4 });
      expect(await fresh.verifyLog("gone")).toMatchObject({
        ok: false,
        firstBadSeq: 3,
        problem: "missing",
      });
      expect(await fresh.verifyLog("swap")).toMatchObject({
        ok: false,
        firstBadSeq: 5,
        problem: "changed",
      });
    });

    it("A4: with a keyed audit, an event rewritten with every later hash recomputed is still found", async () => {
      const r = await runtime({ audit: { key: "audit-key" } });
      await (await r.start("agent", { secret: "s", steps: 4 }, { id: "k" })).result();
      expect(await r.verifyLog("k")).toMatchObject({ ok: true });
      // The tamperer rewrites sequence 2's time and re-hashes the rest without the key.
      const plain = await runtime({ audit: true });
      const { AuditHasher } = await import("../../src/trust/audit.ts");
      const unkeyed = new AuditHasher(true);
      let prev: string | undefined;
      for (let seq = 0; seq <= 5; seq++) {
        const row = (await backend.row("k", seq)) as RawRow;
        const e: Envelope = {
          executionId: "k",
          seq,
          kind: row.kind as Envelope["kind"],
          at: seq === 2 ? row.at + 1 : row.at,
          payload: JSON.parse(row.payload) as Envelope["payload"],
          meta: JSON.parse(row.meta ?? "{}") as Envelope["meta"],
        };
        const stamped = unkeyed.stamp(e, seq === 0 ? undefined : prev);
        prev = stamped.meta?.hash as string;
        await backend.setRow("k", seq, { ...row, at: e.at, meta: JSON.stringify(stamped.meta) });
      }
      expect(await plain.verifyLog("k")).toMatchObject({ ok: true });
      expect(await r.verifyLog("k")).toMatchObject({ ok: false, firstBadSeq: 0 });
    });

    it("A2, A3: a chain's successor names its predecessor's head, and a compacted log still verifies", async () => {
      const r = await runtime({ audit: true, snapshotEvery: 2 });
      const h = await r.start("chat", { turns: 0 }, { id: "talk" });
      // One message for each generation: a third could find the chain already ended.
      for (let i = 0; i < 2; i++) await r.send("talk", `m${i}`);
      const outcome = await h.result();
      expect(outcome.status).toBe("continued");
      await until(async () => (await r.list({ status: ["completed"] })).length > 0);
      const successor = "talk~1";
      expect(await r.verifyLog(successor)).toMatchObject({
        ok: true,
        predecessor: { executionId: "talk", link: "verified" },
      });
      const compacted = await r.compact("talk");
      expect(compacted.removed).toBeGreaterThan(0);
      expect(await r.verifyLog("talk")).toMatchObject({ ok: true });
      await (await r.start("agent", { secret: "s", steps: 3 }, { id: "origin" })).result();
      await (await r.fork("origin", 2, "origin-fork")).result();
      expect(await r.verifyLog("origin-fork")).toMatchObject({ ok: true, events: 5 });
    });

    it("C1..C3: with the codec on, the secret is nowhere in the store, replay works, and a rotation keeps old events readable", async () => {
      const secret = `SECRET-${randomUUID()}`;
      const k1 = aesGcmCodec({ keys: { k1: KEY1 }, currentKeyId: "k1" });
      const r = await runtime({ codec: k1, audit: true, snapshotEvery: 2 });
      const h = await r.start("agent", { secret, steps: 3, wait: true }, { id: "enc" });
      await until(async () => (await r.getState("enc")).status === "parked");
      await r.resume("enc", { reply: `${secret}-reply` });
      expect((await h.result()).output).toEqual({ done: `${secret}-tool-2` });
      await r.schedule("agent", {
        name: "nightly",
        cron: "0 3 * * *",
        input: { secret, steps: 1 },
      });
      expect((await backend.dump()).includes(secret)).toBe(false);
      const raw = await backend.row("enc", 0);
      expect(JSON.parse(raw?.meta ?? "{}")).toMatchObject({ codec: "aes-256-gcm", keyId: "k1" });
      // Replay in a fresh runtime: the fold sees plain payloads.
      const k2 = aesGcmCodec({ keys: { k1: KEY1, k2: KEY2 }, currentKeyId: "k2" });
      const rotated = await runtime({ codec: k2, audit: true });
      const state = await rotated.getState("enc");
      expect(state.input).toEqual({ secret, steps: 3, wait: true });
      expect(state.output).toEqual({ done: `${secret}-tool-2` });
      // A real replay: a parked execution another runtime sealed with k1 is driven on by this
      // one, which re-runs its body from the sealed log (its steps answered from it).
      await r.start("agent", { secret, steps: 2, wait: true }, { id: "enc-3" });
      await until(async () => (await r.getState("enc-3")).status === "parked");
      await rotated.resume("enc-3", "go on");
      expect((await rotated.waitForCompletion("enc-3")).output).toEqual({
        done: `${secret}-tool-1`,
      });
      const again = await rotated.start("agent", { secret, steps: 1 }, { id: "enc-2" });
      await again.result();
      expect(JSON.parse((await backend.row("enc-2", 0))?.meta ?? "{}")).toMatchObject({
        keyId: "k2",
      });
      expect((await rotated.readLog("enc"))[0]?.payload).toMatchObject({ input: { secret } });
      expect(await rotated.verifyLog("enc")).toMatchObject({ ok: true });
      expect((await backend.dump()).includes(secret)).toBe(false);
      // Without k1, the old events are a typed refusal, not garbage.
      const onlyK2 = aesGcmCodec({ keys: { k2: KEY2 }, currentKeyId: "k2" });
      const partial = await runtime({ codec: onlyK2 });
      const refused = await partial.readLog("enc").catch((e: unknown) => e);
      expect(isLoomError(refused, "LOOM_CODEC_KEY")).toBe(true);
    });

    it("X1..X4: eraseSubject leaves no way to the subject's data, and every log still folds, verifies and records it", async () => {
      const secret = `ALICE-${randomUUID()}`;
      const r = await runtime({ audit: true, snapshotEvery: 2 });
      const done = await r.start("agent", { secret, steps: 2 }, { id: "a1", subject: "alice" });
      await done.result();
      const live = await r.start(
        "agent",
        { secret, steps: 1, wait: true, child: true },
        { id: "a2", subject: "alice" },
      );
      await until(async () => (await r.getState("a2")).status === "parked");
      await until(async () => (await statusOrNone(r, "a2::helper#0")) === "parked");
      const fork = await r.fork("a1", 2, "a1-fork");
      await fork.result();
      const other = await r.start("agent", { secret: "bob's", steps: 1 }, { id: "b1" });
      await other.result();
      // Before: readable through the runtime, never in the clear in the store.
      expect((await r.readLog("a1"))[0]?.payload).toMatchObject({ input: { secret } });
      expect((await backend.dump()).includes(secret)).toBe(false);
      const keyBytes = await subjectKeyBytes(await backend.open(), "alice");
      expect((await backend.dump()).includes(keyBytes)).toBe(true);

      const erasure = await r.eraseSubject("alice");
      expect(erasure.executions.sort()).toEqual(["a1", "a1-fork", "a2", "a2::helper#0"]);
      expect(erasure.cancelled).toContain("a2");
      expect(erasure.keyDestroyed).toBe(true);
      expect((await live.result()).status).toBe("cancelled");
      expect((await backend.dump()).includes(secret)).toBe(false);
      expect((await backend.dump()).includes(keyBytes)).toBe(false);
      const fresh = await runtime({ audit: true });
      for (const id of erasure.executions) {
        const log = await fresh.readLog(id);
        expect(log[log.length - 1]).toMatchObject({ kind: "SUBJECT_ERASED" });
        expect(JSON.stringify(log)).not.toContain(secret);
        expect(log[1]?.payload).toEqual({ $erased: "alice" });
        const state = await fresh.getState(id);
        expect(state._erased).toEqual(["alice"]);
        expect(["completed", "cancelled"]).toContain(state.status);
        expect(await fresh.verifyLog(id)).toMatchObject({ ok: true });
        expect((await loadState(fresh.store, id))?.seq).toBe(log.length - 1);
      }
      // Another subject's execution is untouched; a second erasure changes nothing.
      expect((await fresh.getState("b1")).input).toEqual({ secret: "bob's", steps: 1 });
      const again = await fresh.eraseSubject("alice");
      expect(again.keyDestroyed).toBe(false);
      expect((await fresh.readLog("a1")).filter((e) => e.kind === "SUBJECT_ERASED")).toHaveLength(
        1,
      );
    });
  });
}

/** An agent: `steps` tool calls on its secret, maybe a wait for a reply, maybe a child. */
const agent = flow$(
  "agent",
  async (ctx, input: { secret: string; steps: number; wait?: boolean; child?: boolean }) => {
    let out = "";
    for (let i = 0; i < input.steps; i++) {
      out = await ctx.run("tool", () => `${input.secret}-tool-${i}`);
    }
    if (input.child) await ctx.spawn("helper", { secret: input.secret });
    if (input.wait) await ctx.suspend({ timeout: 60_000 });
    return { done: out };
  },
);

const helper = flow$("helper", async (ctx, input: { secret: string }) => {
  await ctx.run("note", () => `${input.secret}-noted`);
  await ctx.suspend({ timeout: 60_000 });
  return "ok";
});

/** A conversation that continues after two messages and ends in its successor. */
const chat = flow$("chat", async (ctx, input: { turns: number }) => {
  const heard = await ctx.receive<string>();
  await ctx.run("reply", () => heard.toUpperCase());
  if (input.turns === 0) return ctx.continueAsNew({ turns: 1 });
  return "bye";
});

/** Changes one letter or digit in the middle of event `seq`'s stored payload. */
async function flipByte(backend: TrustBackend, id: string, seq: number): Promise<void> {
  const row = (await backend.row(id, seq)) as RawRow;
  const text = row.payload;
  let i = text.length >> 1;
  while (i < text.length && !/[A-Za-z0-9]/.test(text[i] as string)) i++;
  const flipped =
    text.slice(0, i) + String.fromCharCode(text.charCodeAt(i) ^ 1) + text.slice(i + 1);
  await backend.setRow(id, seq, { ...row, payload: flipped });
}

/** The stored key material of `subject` (what erasure must destroy). */
async function subjectKeyBytes(store: Store, subject: string): Promise<string> {
  const { subjectKeyId } = await import("../../src/trust/sealed-store.ts");
  const material = await store.getKey(subjectKeyId(subject));
  if (!material) throw new Error(`no key for ${subject}`);
  await store.close();
  return material.slice(material.lastIndexOf(":") + 1);
}

async function statusOrNone(r: Runtime, id: string): Promise<string> {
  return r.getState(id).then(
    (s) => s.status,
    () => "none",
  );
}
