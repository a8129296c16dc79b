/** A logger for tests that check when warnings and errors came (backoff between them), not only what they said. */
import type { Logger } from '../../src/index.js';

export interface TimedLine {
  level: 'warn' | 'error';
  msg: string;
  /** performance.now() when the line was logged. */
  at: number;
  fields: object;
}

/** Keeps warn and error lines with their time; debug and info are dropped. */
export function timedLog(): { logger: Logger; lines: TimedLine[] } {
  const lines: TimedLine[] = [];
  const push = (level: TimedLine['level']) => (fields: object, msg: string) =>
    void lines.push({ level, msg, at: performance.now(), fields });
  return { lines, logger: { debug: () => undefined, info: () => undefined, warn: push('warn'), error: push('error') } };
}
