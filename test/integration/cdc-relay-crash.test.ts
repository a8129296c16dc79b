// test-files: group cdc-server, uses the logical-replication server (its WAL positions and slots)
/** The CDC relay killed between the broker's confirm and the slot's acknowledgement. */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { AMQP_URL, CDC_DATABASE_URL, test, waitFor } from '../support/rig.js';
import { orderEvent, withCdcRig } from '../support/cdc-fixture.js';

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
