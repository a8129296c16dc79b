/**
 * What test-files repeats of a failed file after its summary: CI logs are often read from the
 * end, and a failed file's own output may have scrolled far up between the outputs of others.
 */

const FAILING_MARKER = '✖ failing tests:';
/** Stack frames of node's own test runner say nothing about the failure. */
const RUNNER_FRAME = /^\s*at .*(node:internal|node:async_hooks)/;

/**
 * The spec reporter's "failing tests" section of `output` without the runner's own stack
 * frames, at most `maxLines` lines; the last `maxLines` lines when there is no such section
 * (the process crashed or was killed before reporting).
 */
export function failureDigest(output: string, maxLines = 60): string[] {
  const lines = output.split('\n');
  const start = lines.findIndex((line) => line.startsWith(FAILING_MARKER));
  if (start === -1) return lines.slice(-maxLines);
  // The last frame carries the opening brace of the error's own properties.
  const section = lines
    .slice(start + 1)
    .flatMap((line) => (!RUNNER_FRAME.test(line) ? [line] : line.endsWith(' {') ? ['  {'] : []));
  if (section.length <= maxLines) return section;
  return [...section.slice(0, maxLines), `… ${section.length - maxLines} more lines above in the file's output`];
}
