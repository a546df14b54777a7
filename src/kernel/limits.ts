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
