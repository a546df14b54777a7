/** S12: a chain's inbox is a dense, ordered stream per chain, read by topic past a cursor. */
import { describe, expect, it } from "./vitest.ts";
import type { Json } from "../../kernel/json.ts";
import { T0, type Harness } from "./helpers.ts";

const msg = (topic: string, key: string, payload: Json = { key }) => ({
  topic,
  key,
  payload,
  atMs: T0,
});

export function inboxSuite(h: Harness): void {
  describe("inbox (S12)", () => {
    it("numbers a chain's messages densely from 0, each chain on its own", async () => {
      const store = await h.open();
      expect(await store.appendMessage("c", msg("main", "a"))).toBe(0);
      expect(await store.appendMessage("c", msg("other", "b"))).toBe(1);
      expect(await store.appendMessage("d", msg("main", "x"))).toBe(0);
      expect(await store.appendMessage("c", msg("main", "c", { deep: [1, { n: null }] }))).toBe(2);
      const main = await store.readMessages("c", "main", -1, 10);
      expect(main).toEqual([
        { chainId: "c", seq: 0, topic: "main", key: "a", payload: { key: "a" }, atMs: T0 },
        {
          chainId: "c",
          seq: 2,
          topic: "main",
          key: "c",
          payload: { deep: [1, { n: null }] },
          atMs: T0,
        },
      ]);
      expect((await store.readMessages("c", "other", -1, 10)).map((m) => m.seq)).toEqual([1]);
      expect(await store.readMessages("c", "main", 0, 10)).toHaveLength(1);
      expect(await store.readMessages("c", "main", 2, 10)).toEqual([]);
      expect(await store.readMessages("nobody", "main", -1, 10)).toEqual([]);
    });

    it("reads at most `limit` messages, oldest first", async () => {
      const store = await h.open();
      for (let i = 0; i < 5; i++) await store.appendMessage("c", msg("main", `k${i}`));
      const two = await store.readMessages("c", "main", 0, 2);
      expect(two.map((m) => m.key)).toEqual(["k1", "k2"]);
    });

    it("gives concurrent appends distinct, dense sequence numbers", async () => {
      const store = await h.open();
      const seqs = await Promise.all(
        Array.from({ length: 20 }, (_, i) => store.appendMessage("c", msg("main", `k${i}`))),
      );
      expect([...seqs].sort((a, b) => a - b)).toEqual(Array.from({ length: 20 }, (_, i) => i));
      expect(await store.readMessages("c", "main", -1, 100)).toHaveLength(20);
    });

    it("a message read back is a copy: changing it changes nothing stored", async () => {
      const store = await h.open();
      await store.appendMessage("c", msg("main", "a", { list: [1] }));
      const [first] = await store.readMessages("c", "main", -1, 1);
      (first?.payload as { list: number[] }).list.push(2);
      const [again] = await store.readMessages("c", "main", -1, 1);
      expect(again?.payload).toEqual({ list: [1] });
    });

    const reopen = h.reopen;
    if (!reopen) return;
    it("survives a reopen (S5)", async () => {
      const store = await h.open();
      await store.appendMessage("c", msg("main", "a"));
      const again = await reopen(store);
      expect((await again.readMessages("c", "main", -1, 10)).map((m) => m.key)).toEqual(["a"]);
      expect(await again.appendMessage("c", msg("main", "b"))).toBe(1);
    });
  });
}
