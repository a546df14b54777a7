import { afterEach, expect, it } from "vitest";
import { createRuntime, flow$, memoryStore, type Runtime } from "../src/index.ts";
const open: Runtime[] = [];
afterEach(async () => { await Promise.all(open.splice(0).map((r) => r.close())); });
type Ectx = { meter(d: object): void };
it("probe", async () => {
  let real = 0;
  const effect = { name: "p", reserve: () => ({ tokens: { output: 300 } }), run: async (_: null, e: Ectx) => { real += 300; await new Promise((r) => setTimeout(r, 50)); e.meter({ tokens: { output: 300 } }); return 1; } };
  for (const variant of ["return", "throw", "parallel-return", "rotate", "parallel-rotate"]) {
    real = 0;
    const f = flow$(`v-${variant}`, async (ctx, turn: number) => {
      if (variant.startsWith("parallel")) void ctx.parallel([0, 1, 2].map(() => (c: typeof ctx) => c.execute(effect, null, { retry: false }))).catch(() => 0);
      else void ctx.execute(effect, null, { retry: false }).catch(() => 0);
      if (variant === "throw") throw new Error("bye");
      if (variant.endsWith("rotate") && turn < 3) return ctx.continueAsNew(turn + 1);
      return "done";
    });
    const r = createRuntime({ store: memoryStore(), features: { continueAsNew: true } });
    open.push(r);
    r.registerFlow(f);
    const h = await r.start(f, 0, { id: variant, budget: { tokens: 1000 } });
    await new Promise((res) => setTimeout(res, 400));
    const head = await r.followToHead(variant);
    const s = await r.getState(head);
    const log = await r.readLog(head);
    console.log(variant, JSON.stringify({ status: s.status, head, real, recorded: s._resources, error: (s as any).error?.message, kinds: log.map((e) => e.kind) }));
    void h;
  }
  expect(1).toBe(1);
});
