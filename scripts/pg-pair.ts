/**
 * `npm run pg-pair -- [--async] [--failover-after SECONDS]`: a PostgreSQL 18 primary with a streaming
 * standby of its own (kit/pg-pair.ts), beside the shared server, for trying a failover by hand. Prints
 * the primary's, the standby's and the host-list URL (give the last one to converge as DATABASE_URL),
 * then waits. `--failover-after N` crashes the primary after N seconds and promotes the standby; Enter
 * does the same at any time. Ctrl-C stops both servers and removes their directory.
 */
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';
import { PgPair } from '../kit/pg-pair.js';

const { values } = parseArgs({
  options: { async: { type: 'boolean', default: false }, 'failover-after': { type: 'string' } },
});
const log = (line: string): void => void process.stderr.write(`[pg-pair] ${line}\n`);
const after = values['failover-after'] === undefined ? undefined : Number(values['failover-after']);
if (after !== undefined && !(after >= 0)) throw new Error('--failover-after takes a number of seconds');

const started = Date.now();
// Ctrl-C reaches tsx and this process both, and tsx relays it: a second signal must not cut the cleanup short.
const pair = await PgPair.start({ synchronous: !values.async, signals: false });
let stopping = false;
for (const signal of ['SIGINT', 'SIGTERM'] as const)
  process.on(signal, () => {
    if (stopping) return;
    stopping = true;
    log('stopping both servers and removing their directory');
    void pair.stop().finally(() => process.exit(0));
  });
log(`${values.async ? 'asynchronous' : 'synchronous'} pair streaming after ${Date.now() - started} ms`);
process.stdout.write(`primary   ${pair.primaryUrl}\nstandby   ${pair.standbyUrl}\nhost list ${pair.multiHostUrl}\n`);

let failedOver = false;
async function failover(): Promise<void> {
  if (failedOver) return log('already failed over: the pair cannot fail back');
  failedOver = true;
  const at = Date.now();
  await pair.failPrimary('immediate');
  await pair.promoteStandby();
  log(`primary crashed, standby promoted in ${Date.now() - at} ms; the host list now lands on ${pair.standbyUrl}`);
}
const fail = (err: unknown) => log(`failover failed: ${err instanceof Error ? err.message : String(err)}`);
if (after !== undefined) setTimeout(() => void failover().catch(fail), after * 1000);
if (process.stdin.isTTY) {
  log('Enter: crash the primary and promote the standby; Ctrl-C: stop and remove both');
  createInterface({ input: process.stdin }).on('line', () => void failover().catch(fail));
} else log('Ctrl-C (SIGINT) or SIGTERM: stop and remove both');
// Nothing else holds the process open (the servers are processes of their own); a signal ends it.
setInterval(() => undefined, 60_000);
