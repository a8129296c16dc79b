/**
 * The order and the admission rule of scripts/test-files.ts, as plain functions. Longest first:
 * with N files at a time the suite ends when its last file does, so a long file started late is
 * what makes a parallel run slow; the durations come from the previous runs on this machine.
 */

export interface TestFile {
  path: string;
  /** Starts a server or a browser of its own: CPU-heavy, so at most one such file runs at a time. */
  heavy: boolean;
}

/** The marker a test file carries near its top to be run as a heavy file, with the reason after it. */
export const HEAVY_MARKER = '// test-files: heavy';

export function isHeavy(source: string): boolean {
  return source.split('\n', 40).some((line) => line.startsWith(HEAVY_MARKER));
}

/**
 * Files never timed first (they may be the longest), heavy ones before light ones (heavy files run one
 * at a time, so the last to start ends the suite); then the timed ones, longest first. Sorting is
 * stable: otherwise the order given.
 */
export function longestFirst(files: readonly TestFile[], seconds: Record<string, number>): TestFile[] {
  const estimate = (file: TestFile) => seconds[file.path] ?? Number.POSITIVE_INFINITY;
  return [...files].sort((a, b) => estimate(b) - estimate(a) || Number(b.heavy) - Number(a.heavy));
}

/**
 * The index of the next file to start, or -1 when none may start now: the first waiting file, except
 * that a heavy one waits while another heavy one runs (a light one behind it starts instead).
 */
export function nextToStart(waiting: readonly TestFile[], heavyRunning: number): number {
  return waiting.findIndex((file) => !file.heavy || heavyRunning === 0);
}

/**
 * Deals the files out to `processes` shares for a run with --together (files that need no process
 * of their own: loading src/ once per share instead of once per file is most of a unit run). Longest
 * first onto the share with the least so far; a file never timed counts as one second.
 */
export function shareOut(paths: readonly string[], processes: number, seconds: Record<string, number>): string[][] {
  const shares = Array.from({ length: Math.max(1, Math.min(processes, paths.length)) }, () => ({
    paths: [] as string[],
    total: 0,
  }));
  const estimate = (path: string) => seconds[path] ?? 1;
  for (const path of [...paths].sort((a, b) => estimate(b) - estimate(a))) {
    const least = shares.reduce((min, share) => (share.total < min.total ? share : min));
    least.paths.push(path);
    least.total += estimate(path);
  }
  return shares.map((share) => share.paths);
}
