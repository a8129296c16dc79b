/**
 * The order and the admission rule of scripts/test-files.ts, as plain functions. Longest first:
 * with N files at a time the suite ends when its last file does, so a long file started late is
 * what makes a parallel run slow; the durations come from the previous runs on this machine.
 */

export interface TestFile {
  path: string;
  /**
   * What the file shares that no two files may use at once: `heavy` (it starts a server, a browser or
   * a fleet of processes of its own: on two cores two of them at once starve the rest into timeouts)
   * or a named group (`cdc-server`: the logical-replication server whose WAL positions and replication
   * slots its tests assert on). A file with no group runs beside anything.
   */
  groups: string[];
}

/** The marker a test file carries near its top to be run as a heavy file, with the reason after it. */
export const HEAVY_MARKER = '// test-files: heavy';
/** The marker of a named group: `// test-files: group cdc-server, <reason>`. */
export const GROUP_MARKER = '// test-files: group ';

/** The groups a file's markers name (lines of their own among its first 40). */
export function groupsOf(source: string): string[] {
  const groups = new Set<string>();
  for (const line of source.split('\n', 40)) {
    if (line.startsWith(HEAVY_MARKER)) groups.add('heavy');
    else if (line.startsWith(GROUP_MARKER)) {
      const name = /^[\w-]+/.exec(line.slice(GROUP_MARKER.length))?.[0];
      if (name) groups.add(name);
    }
  }
  return [...groups];
}

/**
 * The reason after a marker a run may leave files out by (`--skip-marked session`), or undefined when
 * the file does not carry it: `// test-files: session <reason>` (the file needs a session of its own,
 * which a pooler in transaction mode cannot give), among its first 40 lines like the others.
 */
export function markerReason(source: string, marker: string): string | undefined {
  const prefix = `// test-files: ${marker}`;
  for (const line of source.split('\n', 40)) {
    if (!line.startsWith(prefix)) continue;
    const rest = line.slice(prefix.length);
    if (rest === '' || /^[\s,]/.test(rest)) return rest.replace(/^[\s,]+/, '').trim();
  }
  return undefined;
}

export function isHeavy(source: string): boolean {
  return groupsOf(source).includes('heavy');
}

/**
 * Files never timed first (they may be the longest), files in a group before the others (a group runs
 * one file at a time, so the last of it to start ends the suite); then the timed ones, longest first.
 * Sorting is stable: otherwise the order given.
 */
export function longestFirst(files: readonly TestFile[], seconds: Record<string, number>): TestFile[] {
  const estimate = (file: TestFile) => seconds[file.path] ?? Number.POSITIVE_INFINITY;
  const grouped = (file: TestFile) => Number(file.groups.length > 0);
  return [...files].sort((a, b) => estimate(b) - estimate(a) || grouped(b) - grouped(a));
}

/**
 * The index of the next file to start, or -1 when none may start now: the first waiting file, except
 * that one whose group has a file running waits (a file behind it starts instead).
 */
export function nextToStart(waiting: readonly TestFile[], running: ReadonlySet<string>): number {
  return waiting.findIndex((file) => file.groups.every((group) => !running.has(group)));
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
