/**
 * Issue 21 item 8: an A2A call whose owner is killed mid-task. The remote task's id is a durable
 * fact of the call's attempt as soon as the agent names it (a STEP_NOTED, effect-call N1), so the
 * attempt that recovers the call finds it: it cancels the orphaned task before it sends the
 * message again (the default), or follows it to its end instead of sending anything (`orphans:
 * "resubscribe"`). Either way exactly one remote task runs to completion.
 */
import type { ChildProcess } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { TaskState } from "@a2a-js/sdk";
import { afterEach, describe, expect, it } from "vitest";
import { createRuntime, type Runtime } from "../src/index.ts";
import { sqliteStore } from "../src/store/sqlite/index.ts";
import { startA2AAgent, type A2AAgent } from "./support/a2a-agent.ts";
import { ownerProcess } from "./support/processes.ts";
import { slow } from "./support/slowdown.ts";
import { until } from "./helpers.ts";

const CHILD = join(import.meta.dirname, "support", "a2a-crash-child.ts");
const children = new Set<ChildProcess>();
const open: Runtime[] = [];
const agents: A2AAgent[] = [];
afterEach(async () => {
  for (const c of children) c.kill("SIGKILL");
  children.clear();
  await Promise.all(open.splice(0).map((r) => r.close()));
  await Promise.all(agents.splice(0).map((a) => a.close()));
});

type Orphans = "cancel" | "resubscribe";

function owner(
  db: string,
  url: string,
  mode: "start" | "recover",
  orphans: Orphans,
  stream: boolean,
) {
  return ownerProcess(CHILD, [db, url, mode, orphans, stream ? "yes" : "no"], children);
}

/** Whether the log of `ask-1` holds the task's id anywhere yet (read from another process). */
async function logNames(db: string, taskId: string): Promise<boolean> {
  const r = createRuntime({ store: sqliteStore(db), background: false });
  try {
    return JSON.stringify(await r.readLog("ask-1")).includes(taskId);
  } finally {
    await r.close();
  }
}

/** The STEP_NOTED facts in the log of `ask-1`, `{ attempt, note }` each. */
async function stepNotes(db: string): Promise<unknown[]> {
  const r = createRuntime({ store: sqliteStore(db), background: false });
  try {
    const log = await r.readLog("ask-1");
    return log
      .filter((e) => e.kind === "STEP_NOTED")
      .map((e) => {
        const { attempt, note } = e.payload as { attempt: unknown; note: unknown };
        return { attempt, note };
      });
  } finally {
    await r.close();
  }
}

/**
 * Starts `ask-1` in an owner process and SIGKILLs it mid-task: once its log holds the remote
 * task's id, or, if it never comes to, a while after the agent started the task.
 */
async function killMidTask(db: string, agent: A2AAgent, orphans: Orphans, stream: boolean) {
  const first = owner(db, agent.url, "start", orphans, stream);
  await until(() => agent.tasks.length === 1, 30_000);
  const taskId = agent.tasks[0]?.taskId ?? "";
  const giveUp = Date.now() + slow(5_000);
  await until(async () => Date.now() > giveUp || (await logNames(db, taskId)), 30_000);
  first.p.kill("SIGKILL");
  await first.exit;
  return taskId;
}

describe("A2A after a crash (issue 21 item 8)", () => {
  for (const stream of [true, false]) {
    it(`${stream ? "streamed" : "polled"}: the orphaned task is cancelled before the message is sent again, and exactly one task completes`, async () => {
      const agent = await startA2AAgent({ streaming: stream });
      agents.push(agent);
      const db = join(mkdtempSync(join(tmpdir(), "loom-a2a-crash-")), "loom.db");
      const orphan = await killMidTask(db, agent, "cancel", stream);

      const second = owner(db, agent.url, "recover", "cancel", stream);
      await until(() => second.exited() || agent.tasks.length === 2, 30_000);
      agent.release();
      await second.exit;
      const outcome = JSON.parse(second.out().trim()) as { status: string; output: unknown };

      const [killed, resent] = agent.tasks;
      expect(killed?.taskId).toBe(orphan);
      expect(agent.cancels.map((c) => c.taskId)).toEqual([orphan]);
      // Cancelled before the message went out again, under the same message id.
      expect(agent.cancels[0]?.atMs).toBeLessThan(resent?.startedAtMs ?? -1);
      expect(resent?.messageId).toBe(killed?.messageId);
      expect(agent.tasks.map((t) => t.finalState)).toEqual([
        TaskState.TASK_STATE_CANCELED,
        TaskState.TASK_STATE_COMPLETED,
      ]);
      expect(outcome).toEqual({
        status: "completed",
        output: { text: "echo: hold on, then echo", state: "completed", taskId: resent?.taskId },
      });
      // Each attempt noted its task as a fact of the step (O1) before it read on.
      const notes = await stepNotes(db);
      expect(notes).toEqual([
        { attempt: 1, note: { a2aTask: orphan } },
        { attempt: 2, note: { a2aTask: resent?.taskId } },
      ]);
    });

    it(`${stream ? "streamed" : "polled"}, orphans "resubscribe": recovery follows the orphaned task to its end and sends nothing`, async () => {
      const agent = await startA2AAgent({ streaming: stream });
      agents.push(agent);
      const db = join(mkdtempSync(join(tmpdir(), "loom-a2a-crash-")), "loom.db");
      const orphan = await killMidTask(db, agent, "resubscribe", stream);
      const asked = agent.methods.length;

      const second = owner(db, agent.url, "recover", "resubscribe", stream);
      // Following it: the agent is asked about the task (a subscription, or a poll).
      await until(() => second.exited() || agent.methods.length > asked, 30_000);
      agent.release();
      await second.exit;
      const outcome = JSON.parse(second.out().trim()) as { status: string; output: unknown };

      expect(agent.tasks).toHaveLength(1);
      expect(agent.cancels).toEqual([]);
      expect(agent.tasks[0]?.finalState).toBe(TaskState.TASK_STATE_COMPLETED);
      expect(agent.methods.slice(asked)).toContain("GetTask");
      expect(agent.methods.slice(asked)).not.toContain("SendMessage");
      expect(agent.methods.slice(asked)).not.toContain("SendStreamingMessage");
      expect(outcome).toEqual({
        status: "completed",
        output: { text: "echo: hold on, then echo", state: "completed", taskId: orphan },
      });
    });
  }

  it("streamed, resubscribe: a task that ends between its read and the subscription is taken from a second read", async () => {
    // Found by the suite on a loaded machine: the agent refuses to subscribe to an ended task.
    const agent = await startA2AAgent({ streaming: true, endBeforeSubscribe: true });
    agents.push(agent);
    const db = join(mkdtempSync(join(tmpdir(), "loom-a2a-crash-")), "loom.db");
    const orphan = await killMidTask(db, agent, "resubscribe", true);
    const asked = agent.methods.length;
    const second = owner(db, agent.url, "recover", "resubscribe", true);
    await second.exit;
    const outcome = JSON.parse(second.out().trim()) as { status: string; output: unknown };
    expect(agent.methods.slice(asked).filter((m) => /subscribe/i.test(m))).toHaveLength(1);
    expect(agent.methods.slice(asked).filter((m) => m === "GetTask")).toHaveLength(2);
    expect(agent.tasks).toHaveLength(1);
    expect(outcome).toEqual({
      status: "completed",
      output: { text: "echo: hold on, then echo", state: "completed", taskId: orphan },
    });
  });
});
