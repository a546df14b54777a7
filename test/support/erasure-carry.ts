/**
 * The erasure exploits' setup (test/security-erasure*.test.ts, issue 22): a resume payload that
 * arrives while no suspend waits (a step is running) is queued, rides the `continueAsNew` carry
 * into the next generation's sequence 0, and is taken there by its first suspend.
 */
import { expect } from "vitest";
import { flow$, type Runtime } from "../../src/index.ts";
import { until } from "../helpers.ts";

/** Opens the running `gate` step of each execution, by id. */
const gates = new Map<string, () => void>();

export const carryFlow = flow$("carry", async (ctx, input: { generation: number }) => {
  if (input.generation === 0) {
    await ctx.run(
      "gate",
      () => new Promise<string>((resolve) => gates.set(ctx.executionId, () => resolve("open"))),
    );
    return ctx.continueAsNew({ generation: 1 });
  }
  return { heard: await ctx.suspend({ timeout: 60_000 }) };
});

/**
 * Starts `id` for `subject`, resumes it with `{ note: secret }` while its step runs, lets it
 * continue as new, and waits until its successor took the carried payload and completed.
 */
export async function carryResumePayload(
  r: Runtime,
  id: string,
  subject: string,
  secret: string,
): Promise<void> {
  await r.start("carry", { generation: 0 }, { id, subject });
  await until(async () => gates.has(id));
  await r.resume(id, { note: secret });
  gates.get(id)?.();
  gates.delete(id);
  const next = `${id}~1`;
  await until(async () => (await r.getState(next).catch(() => undefined))?.status === "completed");
  expect((await r.getState(next)).output).toEqual({ heard: { note: secret } });
  expect((await r.getState(next))._chain?.continuedFrom?.carried.resumePayloads).toEqual([
    { note: secret },
  ]);
}
