/** The CDC relay killed between the broker's confirm and the slot's acknowledgement, and the slot seen from the CLI. */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { AMQP_URL, CDC_DATABASE_URL, test, waitFor } from '../support/rig.js';
import { orderEvent, withCdcRig } from '../support/cdc-fixture.js';

function converge(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', 'src/cli/main.ts', '--database-url', CDC_DATABASE_URL, ...args],
    {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, CONVERGE_LOG_LEVEL: 'warn' },
    },
  );
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  return once(child, 'exit').then(([code]) => ({ code: code as number | null, stdout, stderr }));
}

test('kill -9 between the broker confirm and the LSN acknowledgement: a new relay re-publishes, duplicates yes, losses none', async () => {
  await withCdcRig(async (rig) => {
    await rig.createSlot();
    const before = await rig.slotInfo();
    await rig.append(orderEvent('a', 1), orderEvent('b', 1));
    await rig.append(orderEvent('a', 2));
    await rig.append(orderEvent('b', 2), orderEvent('c', 1));
    const worker = spawn(process.execPath, ['--import', 'tsx', 'test/support/cdc-kill-worker.ts'], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: {
        ...process.env,
        CDC_WORKER: JSON.stringify({
          connectionString: CDC_DATABASE_URL,
          amqpUrl: AMQP_URL,
          schema: rig.schema,
          exchange: rig.exchange,
          slot: rig.slot,
          publication: rig.publication,
        }),
      },
    });
    let output = '';
    worker.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    worker.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const [code, signal] = (await once(worker, 'exit')) as [number | null, NodeJS.Signals | null];
    assert.equal(signal, 'SIGKILL', `the worker killed itself after a confirm (exit ${code}): ${output}`);
    assert.match(output, /^confirmed /m);
    await waitFor(() => rig.received.length > 0 && true, 'the confirmed messages in the queue');
    const rowsAfterCrash = await rig.rows();
    assert.ok(
      rowsAfterCrash.every((r) => r.status === 'pending'),
      'nothing was marked before the crash',
    );
    const afterCrash = await rig.slotInfo();
    assert.equal(afterCrash?.confirmedFlushLsn, before?.confirmedFlushLsn, 'the slot was not acknowledged');
    const receivedBeforeRestart = rig.received.length;

    rig.started();
    await waitFor(async () => (await rig.rows()).every((r) => r.status === 'published'), 'every row marked published');
    const rows = await rig.rows();
    const distinct = new Set(rig.arrivals());
    assert.equal(distinct.size, rows.length, 'every outbox row arrived: no loss');
    assert.deepEqual([...distinct].sort(), rows.map((r) => r.event_id).sort());
    assert.ok(rig.received.length > distinct.size, 'the confirmed ones arrived twice: duplicates, as allowed');
    assert.ok(rig.received.length >= receivedBeforeRestart + rows.length);
  });
});

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
