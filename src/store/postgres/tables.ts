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
 * order. Version 6 keeps each lease row's `runnable` flag (migration 3, leases.ts L4) as it writes
 * a batch's status; a schema upgraded from version 4 keeps `loom_append_4` for the processes of the
 * release before, whose writes leave the flag true where it was (L4 says why that is safe).
 * Version 7 writes the lean event rows of migration 4 (R10) and keeps the flag as 6 does; the
 * earlier versions, which write the old rows, fail on a schema migrated past them (migrations.ts
 * `leanEventRows`). Version 8 also writes a fork's row under its origin (store S21, migration 5)
 * and the list's columns (migration 6, R12); a schema upgraded from version 7 keeps
 * `loom_append_7` for the processes of the release before, whose forks get no row (their origin
 * does not list them) and whose appends leave the list's columns as they were (a row they start
 * has no principal or spent until a batch of this release carries one). Version 9 also writes an
 * execution's queue columns (migration 7), refuses a dedupe key a queued execution holds (R13) and
 * wakes the fleet's admitters (R14); a schema upgraded from version 8 keeps `loom_append_8` for the
 * processes of the release before, which know no queue (they record none, and their ends of
 * queued executions wake no admitter: its poll finds the slot).
 */
export const APPEND_ROUTINE = "loom_append_9";

/** The statuses a claim takes (S17), as an SQL list: whatever a lease row's `runnable` mirrors. */
export const RUNNABLE_SQL = "'pending', 'running'";

/**
 * When a lease row's lease is free, as SQL over the row's columns (prefixed `${p}.` if given): a
 * released lease at once (-1, before any expiry: claims take times of 0 or more), a held one at its
 * expiry. The claim index (migration 3) is on it; the claim (leases.ts L4) must name it alike.
 */
export const freeAtSql = (p = "") =>
  `(CASE WHEN ${p && `${p}.`}owner IS NULL THEN -1 ELSE ${p && `${p}.`}expires_at END)`;

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
  /** Forks by origin (S21) and the fleet's members (S22): migration 5, records.ts. */
  forks: string;
  members: string;
  /** Rate limiters (S30..S34): migration 8, limiters.ts. */
  limiters: string;
  limiterGrants: string;
  limiterWaiters: string;
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
    forks: t("forks"),
    members: t("members"),
    limiters: t("limiters"),
    limiterGrants: t("limiter_grants"),
    limiterWaiters: t("limiter_waiters"),
    appendRoutine: t(APPEND_ROUTINE),
  };
}
