/**
 * What the worker server's endpoints do (worker-server.ts), once a request is authenticated and
 * its body parsed: each endpoint's handler, by path and method.
 *
 * - `POST /dispatch`: starts (or attaches to) the execution, counts it as active here, and
 *   answers 202 once its start is durable.
 * - `POST /cancel`: cancels the execution; `cancelled` says whether this request ended it.
 * - `GET /health`: the owner and the active count, or RuntimeClosedError once the runtime is
 *   closed (worker-server.ts H6).
 *
 * A handler throws what it cannot do; the server answers it as data (H3).
 */
import { isLoomError } from "../kernel/errors.ts";
import type { Json } from "../kernel/json.ts";
import type { Runtime } from "../runtime/runtime.ts";
import type { ActiveExecutions } from "./active-executions.ts";
import type { LocalWorkerRuntime } from "./local-worker.ts";
import { checkedCancel, checkedDispatch, reasonText } from "./worker-runtime.ts";

export interface Answer {
  status: number;
  body: Json;
}

export type Handler = (body: unknown) => Promise<Answer>;

/** Handlers by path, then by method. */
export type Routes = Record<string, Record<string, Handler>>;

export function workerRoutes(
  runtime: Runtime,
  local: LocalWorkerRuntime,
  active: ActiveExecutions,
): Routes {
  return {
    "/dispatch": {
      POST: async (body) => {
        const id = await local.accept(checkedDispatch(body));
        active.add(id);
        return { status: 202, body: { executionId: id } };
      },
    },
    "/cancel": {
      POST: async (body) => {
        const request = checkedCancel(body);
        const why = reasonText(request.reason);
        const cancelled = await runtime.cancel(request.executionId, why);
        return { status: 200, body: { executionId: request.executionId, cancelled } };
      },
    },
    "/health": {
      GET: async () => {
        await assertOpen(runtime);
        const count = await active.count();
        return { status: 200, body: { ok: true, owner: runtime.ownerId, active: count } };
      },
    },
  };
}

/**
 * Throws RuntimeClosedError once the runtime is closed (H6). The runtime has no public flag;
 * every method of it that acts checks that it is open before it looks at its arguments, so a
 * cancel of the empty id answers RuntimeClosedError when closed and InvalidIdError when open,
 * reading and writing nothing either way.
 */
async function assertOpen(runtime: Runtime): Promise<void> {
  try {
    await runtime.cancel("");
  } catch (e) {
    if (isLoomError(e, "LOOM_RUNTIME_CLOSED")) throw e;
  }
}
