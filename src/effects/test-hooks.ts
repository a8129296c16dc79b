/**
 * Fault injection for converge's own tests, deliberately not an option: nothing outside the
 * test workers imports this file, and it is not exported from any index.
 */
export const effectTestHooks: {
  /** Runs after the remote call returned and before its result is recorded (the crash window). */
  afterCall?: (key: string) => void;
} = {};
