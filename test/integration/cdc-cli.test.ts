// test-files: group cdc-server, uses the logical-replication server (its WAL positions and slots)
// test-files: session, `relay --mode cdc` needs a replication session, which CONVERGE_POOL_MODE=transaction refuses
/** The CDC relay from the command line: `converge cdc slot create|show|drop` and `converge relay --mode cdc`. */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { cliNodeArgs } from '../support/cli-bundle.js';
import { AMQP_URL, CDC_DATABASE_URL, DATABASE_URL, test, uniqueName, waitFor } from '../support/rig.js';
import { orderEvent, withCdcRig, withNonLogicalSchema } from '../support/cdc-fixture.js';

function converge(
  args: string[],
  databaseUrl = CDC_DATABASE_URL,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [...cliNodeArgs(), '--database-url', databaseUrl, ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, CONVERGE_LOG_LEVEL: 'warn' },
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  return once(child, 'exit').then(([code]) => ({ code: code as number | null, stdout, stderr }));
}

test('`converge cdc slot show` reports the retained WAL growing while no relay runs', async () => {
  await withCdcRig(async (rig) => {
    const created = await converge([
      '--schema',
      rig.schema,
      'cdc',
      'slot',
      'create',
      '--slot',
      rig.slot,
      '--publication',
      rig.publication,
    ]);
    assert.equal(created.code, 0, created.stderr);
    assert.match(created.stdout, new RegExp(`slot ${rig.slot} created`));
    const show = async () => {
      const result = await converge(['cdc', 'slot', 'show', '--slot', rig.slot]);
      assert.equal(result.code, 0, result.stderr);
      const retained = /retained wal bytes\s+(\d+)/.exec(result.stdout);
      assert.ok(retained, result.stdout);
      assert.match(result.stdout, /active pid\s+-/);
      assert.match(result.stdout, /confirmed lsn\s+[0-9A-F]+\/[0-9A-F]+/);
      return Number(retained[1]);
    };
    const first = await show();
    // New WAL while nobody reads the slot: it keeps all of it.
    for (let i = 0; i < 20; i++) await rig.append(orderEvent(`w${i}`, 1, { payload: { pad: 'x'.repeat(2000) } }));
    const second = await show();
    assert.ok(second > first, `retained WAL grew (${first} -> ${second})`);
    const json = await converge(['cdc', 'slot', 'show', '--slot', rig.slot, '--json']);
    assert.equal((JSON.parse(json.stdout) as { slot: string }).slot, rig.slot);
    const missing = await converge(['cdc', 'slot', 'show', '--slot', 'cvt_no_such_slot']);
    assert.equal(missing.code, 1);
    const dropped = await converge(['cdc', 'slot', 'drop', '--slot', rig.slot, '--publication', rig.publication]);
    assert.equal(dropped.code, 0, dropped.stderr);
    assert.equal(await rig.slotInfo(), undefined);
  });
});

test('`converge relay --mode cdc` creates its slot, publishes and marks, and stops on SIGTERM', async () => {
  await withCdcRig(async (rig) => {
    const child = spawn(
      process.execPath,
      [
        ...cliNodeArgs(),
        '--database-url',
        CDC_DATABASE_URL,
        '--schema',
        rig.schema,
        'relay',
        '--mode',
        'cdc',
        '--slot',
        rig.slot,
        '--publication',
        rig.publication,
        '--amqp-url',
        AMQP_URL,
        '--exchange',
        rig.exchange,
      ],
      { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, CONVERGE_LOG_LEVEL: 'warn' } },
    );
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const exited = once(child, 'exit');
    try {
      await waitFor(async () => (await rig.slotInfo())?.activePid != null, 'the CLI relay to hold its slot', 30_000);
      const [id] = await rig.append(orderEvent('a', 1));
      await waitFor(async () => (await rig.rows())[0]?.status === 'published', 'the event marked published');
      assert.deepEqual(rig.arrivals(), [id]);
    } finally {
      child.kill('SIGTERM');
    }
    const [code] = (await exited) as [number | null];
    assert.equal(code, 0, stderr);
  });
});

test('`converge relay --mode cdc` on a schema never migrated exits 1 with the reason, instead of retrying', async () => {
  const run = await converge([
    '--schema',
    uniqueName('cvt_cdc_never_migrated'),
    'relay',
    '--mode',
    'cdc',
    '--slot',
    uniqueName('cvt_cdc_slot'),
    '--amqp-url',
    AMQP_URL,
  ]);
  assert.equal(run.code, 1, run.stderr);
  assert.match(run.stderr, /CONVERGE_SCHEMA_NOT_MIGRATED: .*run `converge migrate`/);
});

test('on a server without wal_level=logical, `converge cdc slot create` and `converge relay --mode cdc` exit 1 with CONVERGE_WAL_LEVEL_NOT_LOGICAL', async () => {
  await withNonLogicalSchema(async (db) => {
    const slot = uniqueName('cvt_cdc_slot');
    const names = ['--slot', slot, '--publication', slot];
    const created = await converge(['--schema', db.schema, 'cdc', 'slot', 'create', ...names], DATABASE_URL);
    assert.equal(created.code, 1, created.stderr);
    assert.match(
      created.stderr,
      /CONVERGE_WAL_LEVEL_NOT_LOGICAL: PostgreSQL at \S+ has wal_level=\w+;.*restart PostgreSQL/,
    );
    const relay = await converge(
      ['--schema', db.schema, 'relay', '--mode', 'cdc', ...names, '--amqp-url', AMQP_URL],
      DATABASE_URL,
    );
    assert.equal(relay.code, 1, relay.stderr);
    assert.match(
      relay.stderr,
      /CONVERGE_WAL_LEVEL_NOT_LOGICAL: PostgreSQL at \S+ has wal_level=\w+;.*restart PostgreSQL/,
    );
  });
});
