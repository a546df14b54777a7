/** The messages between an isolated effect's parent and its child process (isolated.ts). */
import type { ErrorData } from "../kernel/errors.ts";
import type { Json } from "../kernel/json.ts";
import type { ResourceSnapshot } from "../kernel/resources.ts";

/** Marks an isolated wrapper; the child runs the effect it wraps. */
export const INNER: unique symbol = Symbol.for("loom.isolated.inner");

export interface ChildRequest {
  /** The file URL of the module that exports the effect. */
  module: string;
  export?: string;
  name: string;
  input: Json;
  executionId: string;
  stepId: string;
  attempt: number;
  idempotencyKey: string;
  resources: ResourceSnapshot;
}

export type ChildReply =
  | { type: "meter"; delta: Json }
  | { type: "done"; output: Json; maxRssBytes: number }
  | { type: "failed"; error: ErrorData; maxRssBytes: number };
