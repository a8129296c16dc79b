/**
 * `tsx scripts/pooler.ts run -- <command> [args]`: runs the command with DATABASE_URL pointing at the
 * PgBouncer in transaction mode at POOLER_DATABASE_URL (kit/pgbouncer.ts; started first when local and
 * down, in front of DATABASE_URL), CONVERGE_TEST_POOL_MODE=transaction, which the test rig reads (no
 * named prepared statements in the test processes), and CONVERGE_POOL_MODE=transaction, which the
 * `converge` command reads (the same for the CLI processes tests start).
 * The pooler is a shared service like PostgreSQL: it stays up afterwards. Exits as the command did.
 * `npm run test:pooler` runs the integration suite this way.
 */
import { POOLER_DATABASE_URL, preparePgBouncer } from '../kit/pgbouncer.js';
import { DATABASE_URL } from '../kit/services.js';
import { exitLike, runChild } from './env/child.js';

const [verb, separator, ...command] = process.argv.slice(2);
if (verb !== 'run' || separator !== '--' || command.length === 0) {
  process.stderr.write('usage: tsx scripts/pooler.ts run -- <command> [args]\n');
  process.exit(2);
}

try {
  process.stderr.write(`pooler: ${await preparePgBouncer(POOLER_DATABASE_URL, DATABASE_URL)}\n`);
} catch (err) {
  process.stderr.write(`pooler: ${(err as Error).message}\n`);
  process.exit(1);
}
exitLike(
  await runChild(command, {
    DATABASE_URL: POOLER_DATABASE_URL,
    CONVERGE_TEST_DIRECT_DATABASE_URL: DATABASE_URL,
    CONVERGE_TEST_POOL_MODE: 'transaction',
    CONVERGE_POOL_MODE: 'transaction',
  }),
);
