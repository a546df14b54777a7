/**
 * The statuses as people read them, the same on the dashboard and wherever Loom explains one:
 * what each means and whether an execution in it has ended.
 *
 * S1. Every status has a meaning: a `StatusTable` (kernel/events.ts E5), so a status added to
 *     the kernel's union does not compile here until it is explained.
 * S2. Whether a status has ended is the kernel's (`isTerminalStatus`), not restated here.
 */
import {
  EXECUTION_STATUSES,
  isTerminalStatus,
  type ExecutionStatus,
  type StatusTable,
} from "../kernel/events.ts";

/** S1 */
export const STATUS_MEANING: StatusTable<string> = {
  queued: "waiting in its queue for a slot",
  pending: "recorded, its body not yet run",
  running: "its body is running",
  parked: "waiting for a resume, a message or a timer, holding no worker",
  completed: "ended with its output",
  failed: "ended with an error",
  cancelled: "ended by a cancel or its deadline",
  continued: "ended by handing its history on to its next generation",
};

export interface StatusView {
  status: ExecutionStatus;
  meaning: string;
  ended: boolean;
}

/** Every status in the kernel's order, with its meaning (S1) and whether it ended (S2). */
export const STATUS_VIEWS: readonly StatusView[] = EXECUTION_STATUSES.map((status) => ({
  status,
  meaning: STATUS_MEANING[status],
  ended: isTerminalStatus(status),
}));
