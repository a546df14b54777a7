/**
 * `loom schedules [--json]`: the cron schedules stored in the database, with each one's next
 * occurrence (on this machine's clock; none while paused) and the id its execution will have.
 * `loom schedules pause|resume <name>`: `runtime.pauseSchedule` / `resumeSchedule` (schedules.ts
 * SC4), as no principal: an owned schedule is refused, as `runtime.unschedule` refuses it.
 */
import type { Command } from "../args.ts";
import type { Io } from "../io.ts";
import { openRuntime } from "../open-runtime.ts";
import { nextOccurrence, occurrenceId } from "../../runtime/schedules.ts";

type SchedulesCommand = Extract<Command, { name: "schedules" }>;

export async function schedulesCommand(cmd: SchedulesCommand, io: Io): Promise<number> {
  const runtime = await openRuntime(cmd, io.cwd, { background: false, mustExist: true });
  try {
    if (cmd.set) {
      const { verb, name } = cmd.set;
      const s =
        verb === "pause" ? await runtime.pauseSchedule(name) : await runtime.resumeSchedule(name);
      io.out(
        cmd.json
          ? JSON.stringify(s, null, 2)
          : `${verb === "pause" ? "paused" : "resumed"} ${s.name}`,
      );
      return 0;
    }
    const now = runtime.clock.now();
    const rows = (await runtime.store.listSchedules()).map((s) => {
      const next = nextOccurrence(s, now);
      return {
        ...s,
        next: next === undefined ? null : new Date(next).toISOString(),
        nextId: next === undefined ? null : occurrenceId(s.name, next),
      };
    });
    if (cmd.json) {
      io.out(JSON.stringify(rows, null, 2));
      return 0;
    }
    if (rows.length === 0) {
      io.out("no schedules");
      return 0;
    }
    const table = [
      ["NAME", "FLOW", "CRON", "TZ", "NEXT"],
      ...rows.map((r) => [
        r.name,
        r.flow,
        r.cron,
        r.timezone,
        r.paused ? "paused" : (r.next ?? "never"),
      ]),
    ];
    const widths = table[0]?.map((_, i) => Math.max(...table.map((row) => row[i]?.length ?? 0)));
    io.out(
      table
        .map((row) =>
          row
            .map((cell, i) => cell.padEnd(widths?.[i] ?? 0))
            .join("  ")
            .trimEnd(),
        )
        .join("\n"),
    );
    return 0;
  } finally {
    await runtime.close();
  }
}
