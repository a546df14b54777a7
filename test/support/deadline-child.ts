/**
 * A process whose only pending work is a deadline (ADR 0020 L26: deadline timers are not
 * unref'd): one execution whose step waits on a promise that never settles and holds no timer.
 * The runtime's own timers (heartbeat, background and notice loops) are unref'd, so the deadline
 * timer alone keeps the process alive until it fires; then it prints the outcome as JSON and
 * exits 0. Were that timer unref'd, node would exit at once with 13 (an unsettled top-level
 * await) and print nothing.
 * Usage: tsx deadline-child.ts flow|step <ms>
 */
import { createRuntime, flow$, memoryStore } from "../../src/index.ts";

const [which, ms] = process.argv.slice(2);
const budgetMs = Number(ms);
const never = () => new Promise<never>(() => undefined);
const f =
  which === "step"
    ? flow$("hangs-step", async (ctx) => ctx.run("hang", never, { timeoutMs: budgetMs }))
    : flow$("hangs-flow", async (ctx) => ctx.run("hang", never), { deadlineMs: budgetMs });
const runtime = createRuntime({ store: memoryStore() });
const handle = await runtime.start(f, null);
const outcome = await handle.result();
process.stdout.write(`${JSON.stringify(outcome)}\n`);
await runtime.close();
