/**
 * Fault injection for converge's own tests, deliberately not an option: nothing outside the
 * test workers imports this file, and it is not exported from any index.
 */
export const cdcTestHooks: {
  /** Runs when confirmed events are about to be marked and their LSN acknowledged (a crash window). */
  beforeAcknowledge?: (eventIds: readonly string[]) => void;
  /** Runs after a mark missed rows and before they are looked at again (a commit can become visible in between). */
  afterIncompleteMark?: () => Promise<void>;
} = {};
