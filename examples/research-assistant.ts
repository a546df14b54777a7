/**
 * An example agent: a research assistant. It plans, runs several tool steps, asks the user
 * which angle to take (a suspend answered by `loom resume`), waits a moment (a durable sleep)
 * and writes a summary. Every step is durable: kill the process anywhere and it picks up where
 * the log says it was.
 */
import { appendFileSync } from "node:fs";
import { flow$, step$ } from "loomwork";

/** Where the demo counts real tool executions (to show that completed steps never re-run). */
const ledger = process.env.LOOM_DEMO_LEDGER;

function note(what: string): void {
  if (ledger) appendFileSync(ledger, `${what}\n`);
}

const search = step$("search", async (query: string, { signal }) => {
  note(`search:${query}`);
  await new Promise<void>((resolve, reject) => {
    const t = setTimeout(resolve, 400);
    signal.addEventListener("abort", () => {
      clearTimeout(t);
      reject(new Error("search aborted", { cause: signal.reason }));
    });
  });
  return { query, finding: `${query}: ${query.length * 7} sources agree` };
});

export const research = flow$("research", async (ctx, input: { topic: string }) => {
  const plan = await ctx.run("plan", () => {
    note("plan");
    return ["history", "physics", "forecasts"].map((angle) => `${input.topic} ${angle}`);
  });
  const findings: { query: string; finding: string }[] = [];
  for (const query of plan) findings.push(await ctx.execute(search, query));
  const answer = await ctx.suspend<{ angle: string }>({ timeout: 10 * 60_000 });
  await ctx.sleep(1_000);
  return ctx.run("summary", () => {
    note("summary");
    const kept = findings.filter((f) => f.query.includes(answer.angle));
    return { topic: input.topic, angle: answer.angle, summary: kept.map((f) => f.finding) };
  });
});
