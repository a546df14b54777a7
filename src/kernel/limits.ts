import { InvalidInputError } from "./errors.ts";

/** Payload bounds (bytes of JSON text). Every one is refused with PayloadTooLargeError. */
export interface Limits {
  maxInputBytes: number;
  maxOutputBytes: number;
  /** A step's input or output, a decision's value, a resume payload. */
  maxStepPayloadBytes: number;
}

export const DEFAULT_LIMITS: Readonly<Limits> = {
  maxInputBytes: 1024 * 1024,
  maxOutputBytes: 1024 * 1024,
  maxStepPayloadBytes: 1024 * 1024,
};

/**
 * `timeoutMs` and `deadlineMs` are finite numbers > 0; NaN, 0, negatives and Infinity are refused
 * (omit the field for no limit).
 */
export function checkedDuration(value: unknown, what: string): number {
  if (typeof value !== "number" || !Number.isFinite(value) || value <= 0) {
    throw new InvalidInputError(
      `${what} must be a finite number of milliseconds > 0 (omit it for no limit), got ${typeof value === "number" ? value : JSON.stringify(value)}`,
    );
  }
  return value;
}
