/** The default clock and id source: the only places the runtime reads wall time or randomness. */
import { randomUUID } from "node:crypto";
import type { Clock, IdSource } from "../kernel/clock.ts";

export const systemClock: Clock = { now: () => Date.now() };

export const randomIds: IdSource = { newId: () => randomUUID() };

export const delay = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
