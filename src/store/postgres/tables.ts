/**
 * The names of a schema's tables and of its append routine. Its own module, so that the routine
 * (append-routine.ts) and the connection helpers (db.ts) can both use them.
 */

/**
 * The routine's name in the schema, with its version (R1). Version 2 lets an erasure follow the end
 * of a log (S20); a schema upgraded from version 1 keeps `loom_append_1` for the processes of the
 * release before, which refuse such a batch, as that release did. Version 3 pins its own
 * `search_path` (R7); a schema upgraded from version 2 keeps `loom_append_2`, unpinned, for the
 * processes of the release before. Version 4 checks a step's execution row in the UPDATE that
 * writes it (R8) instead of reading it locked first; a schema upgraded from version 3 keeps
 * `loom_append_3` for the processes of the release before, which take the same locks in the same
 * order. Version 7 writes the lean event rows of migration 3 (R10); the earlier versions, which
 * write the old rows, fail on a schema migrated past them (migrations.ts `leanEventRows`).
 */
export const APPEND_ROUTINE = "loom_append_7";

/** The schema's tables, quoted and qualified. */
export interface Tables {
  migrations: string;
  events: string;
  executions: string;
  leases: string;
  timers: string;
  snapshots: string;
  notices: string;
  schedules: string;
  inbox: string;
  inboxHeads: string;
  /** Key material (keys.ts, S19). */
  keys: string;
  /** The append routine (append-routine.ts). */
  appendRoutine: string;
}

export function tables(schema: string): Tables {
  const t = (name: string) => `"${schema}".${name}`;
  return {
    migrations: t("migrations"),
    events: t("events"),
    executions: t("executions"),
    leases: t("leases"),
    timers: t("timers"),
    snapshots: t("snapshots"),
    notices: t("notices"),
    schedules: t("schedules"),
    inbox: t("inbox"),
    inboxHeads: t("inbox_heads"),
    keys: t("keys"),
    appendRoutine: t(APPEND_ROUTINE),
  };
}
