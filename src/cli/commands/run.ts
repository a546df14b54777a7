/**
 * `loom run <module> <flow> [--input JSON] [--id ID] [--subject ID]`: starts a flow and waits for
 * its outcome. `--subject` names the data subject whose data the execution holds (its payloads
 * are sealed with the subject's key, which `loom erase-subject` destroys).
 *
 * The runtime runs its background loop, so when the execution parks on a suspend and another
 * process appends the resume, this process picks the execution up again (within a poll
 * interval) and carries it to the end. While it waits it also helps recover abandoned
 * executions of the module's flows, like a worker.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { isTerminalStatus } from "../../kernel/events.ts";
import type { Runtime } from "../../runtime/runtime.ts";
import type { Outcome } from "../../runtime/outcome.ts";
import { DEFAULT_DB, DEFAULT_PG_SCHEMA, type Command } from "../args.ts";
import { errorLine } from "../cli-error.ts";
import { errorText, formatOutcome, shellQuote } from "../format.ts";
import type { Io } from "../io.ts";
import { UnknownFlowError } from "../../kernel/errors.ts";
import { loadFlows } from "../load-module.ts";
import { openRuntime, type Database } from "../open-runtime.ts";
import { watchSignals } from "../signals.ts";

type RunCommand = Extract<Command, { name: "run" }>;

const PARK_POLL_MS = 250;

export async function runCommand(cmd: RunCommand, io: Io): Promise<number> {
  const { flows } = await loadFlows(cmd.module, io.cwd);
  if (!flows.some((f) => f.name === cmd.flow)) {
    // Refused before the database is opened, so a typo creates no loom.db.
    const known = flows.map((f) => `"${f.name}"`).join(", ");
    throw new UnknownFlowError(
      `no flow named ${JSON.stringify(cmd.flow)} in ${cmd.module} (it has ${known})`,
    );
  }
  const signals = watchSignals();
  const stopWatching = new AbortController();
  let own: string | undefined = cmd.id;
  const runtime = await openRuntime(cmd, io.cwd, {
    background: true,
    mustExist: false,
    onError: (e) => io.err(`loom: ${errorLine(e)}`),
    // Only this command's own execution and its chain's generations: a short run must not
    // adopt (and abandon) other work.
    recoverWhere: (executionId) =>
      own !== undefined && (executionId === own || executionId.startsWith(`${own}~`)),
  });
  try {
    for (const flow of flows) runtime.registerFlow(flow);
    const options = {
      ...(cmd.id === undefined ? {} : { id: cmd.id }),
      ...(cmd.subject === undefined ? {} : { subject: cmd.subject }),
    };
    const handle = await runtime.start(cmd.flow, cmd.input, options);
    const id = handle.id;
    own = id;
    void announceParking(runtime, id, cmd, io, stopWatching.signal);
    const until = (p: Promise<Outcome>) =>
      Promise.race([p, signals.received.then((signal) => ({ interrupted: signal }))]);
    let ended = await until(handle.result());
    // A chain (ADR 0109): follow each continuation to the generation that ends it.
    while (!("interrupted" in ended) && ended.status === "continued" && ended.continuedTo) {
      io.err(`loom: execution "${id}" continued as "${ended.continuedTo}"`);
      ended = await until(runtime.waitForCompletion(ended.continuedTo));
    }
    if ("interrupted" in ended) {
      const status = await runtime.getState(id).then(
        (s) => s.status,
        () => "unknown",
      );
      io.err(
        `loom: ${ended.interrupted} received; execution "${id}" is left ${status} ` +
          `(loom worker, or this command again with --id ${shellQuote(id)} and the same input, carries it on)`,
      );
      return 130;
    }
    io.out(formatOutcome(id, ended));
    return settle(id, ended, io);
  } finally {
    stopWatching.abort();
    try {
      await runtime.close();
    } finally {
      signals.dispose();
    }
  }
}

function settle(id: string, outcome: Outcome, io: Io): number {
  if (outcome.status === "failed") {
    const why = outcome.error ? errorText(outcome.error) : "no error recorded";
    io.err(`loom: execution "${id}" failed: ${why}`);
    return 1;
  }
  if (outcome.status === "cancelled") {
    io.err(`loom: execution "${id}" was cancelled`);
    return 1;
  }
  return 0;
}

/** Tells the user, once for each suspend the execution parks on, how to resume it from elsewhere. */
async function announceParking(
  runtime: Runtime,
  id: string,
  where: Database,
  io: Io,
  signal: AbortSignal,
): Promise<void> {
  const dbFlag = where.pg
    ? ` --pg ${shellQuote(where.pg.url)}${where.pg.schema === DEFAULT_PG_SCHEMA ? "" : ` --pg-schema ${where.pg.schema}`}`
    : where.db === DEFAULT_DB
      ? ""
      : ` --db ${shellQuote(where.db)}`;
  const announced = new Set<string>();
  try {
    for (;;) {
      await sleep(PARK_POLL_MS, undefined, { signal });
      const { status, _openSuspends } = await runtime.getState(id);
      const waiting = status === "parked" ? _openSuspends[0] : undefined;
      if (waiting !== undefined && !announced.has(waiting)) {
        announced.add(waiting);
        io.err(
          `loom: execution "${id}" is parked on a suspend; still waiting. ` +
            `Resume it from another terminal: loom resume ${shellQuote(id)} '<JSON>'${dbFlag}`,
        );
      }
      if (isTerminalStatus(status)) return;
    }
  } catch {
    // Aborted (the command is ending) or the runtime closed: nothing left to announce.
  }
}
