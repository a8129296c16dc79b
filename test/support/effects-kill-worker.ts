/**
 * An effect worker that SIGKILLs its own process right after the remote call returned and before
 * its outcome is recorded: the crash window of performEffect. Started by
 * test/integration/effects.test.ts with its settings in EFFECT_WORKER (JSON), through performEffect's
 * public fault-injection hook.
 */
import pg from 'pg';
import { performEffect } from '../../src/effects/index.js';
import { sendMessage } from './fake-remote.js';

const settings = JSON.parse(process.env.EFFECT_WORKER ?? '{}') as {
  connectionString: string;
  schema: string;
  eventId: string;
  remote: string;
};

const pool = new pg.Pool({ connectionString: settings.connectionString, max: 1 });
await performEffect(pool, {
  schema: settings.schema,
  event: { eventId: settings.eventId },
  effect: 'send-sms',
  call: (key, signal) => sendMessage(settings.remote, key, signal),
  hooks: {
    afterCall: (key) => {
      process.stdout.write(`called ${key}\n`);
      process.kill(process.pid, 'SIGKILL');
    },
  },
});
process.stdout.write('recorded: the hook did not run\n');
await pool.end();
