/**
 * Time and identity are inputs (STYLE 2). The runtime takes a Clock and an IdSource and writes
 * what they return into events; nothing below the runtime reads the wall clock.
 */
export interface Clock {
  /** Epoch milliseconds. Must advance in real time for deadlines and timers to fire on time. */
  now(): number;
}

export interface IdSource {
  /** A fresh, unique execution id. */
  newId(): string;
}

/** The largest delay Node's setTimeout honours; longer waits are armed in chunks. */
export const MAX_TIMER_CHUNK_MS = 2 ** 31 - 1;
