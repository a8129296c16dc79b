// test-files: group cdc-server, uses the logical-replication server (its WAL positions and slots)
/**
 * `readPipelineStatus` and `converge status` with CDC slots, on the logical-replication server: a
 * slot nothing streams from is reported with the WAL it retains (a warning while events are young,
 * a stall once they are old), a streamed slot is quiet until it retains more than the warning
 * threshold, and a missing slot is a stall.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readPipelineStatus, type PipelineStatus, type PipelineStatusOptions } from '../../src/ops/index.js';
import { orderEvent, withCdcRig, type CdcRig } from '../support/cdc-fixture.js';
import { cli } from '../support/cli.js';
import { CDC_DATABASE_URL, test, waitFor } from '../support/rig.js';

const status = (rig: CdcRig, options: Partial<PipelineStatusOptions> = {}): Promise<PipelineStatus> =>
  readPipelineStatus(rig.pool, { schema: rig.schema, sampleMs: 0, cdcSlots: [rig.slot], ...options });
const slotFindings = (s: PipelineStatus) =>
  s.findings.filter((f) => f.kind.startsWith('cdc-slot-')).map((f) => [f.kind, f.severity, f.subject]);

test('a slot no relay streams from: a warning with the retained WAL while events are young, a stall once they are old', async () => {
  await withCdcRig(async (rig) => {
    await rig.createSlot();
    for (let i = 0; i < 5; i++) await rig.append(orderEvent(`s${i}`, 1, { payload: { pad: 'x'.repeat(2000) } }));
    const young = await status(rig, { stallAfterMs: 600_000 });
    assert.deepEqual(slotFindings(young), [['cdc-slot-inactive', 'warning', rig.slot]]);
    assert.deepEqual(young.cdcSlots, [
      {
        slot: rig.slot,
        exists: true,
        active: false,
        retainedWalBytes: young.cdcSlots[0]!.retainedWalBytes,
        walStatus: 'reserved',
      },
    ]);
    // More WAL while nothing reads the slot: the slot keeps all of it.
    for (let i = 0; i < 5; i++)
      await rig.append(orderEvent(`n${i}`, 1, { payload: { pad: randomBytes(4000).toString('hex') } }));
    const later = await status(rig, { stallAfterMs: 600_000 });
    const [first, second] = [young.cdcSlots[0]!.retainedWalBytes, later.cdcSlots[0]!.retainedWalBytes];
    assert.ok(second >= first + 5 * 8000, `retained WAL grew by the new rows: ${first} -> ${second} bytes`);
    assert.equal(young.stalled, false);
    const old = await status(rig, { stallAfterMs: 0 });
    assert.deepEqual(slotFindings(old), [['cdc-slot-inactive', 'stalled', rig.slot]]);
    assert.equal(old.stalled, true);
  });
});

test('a slot a relay streams from is quiet below the WAL threshold and a warning at it', async () => {
  await withCdcRig(async (rig) => {
    const relay = rig.started();
    await relay.ready();
    await rig.append(orderEvent('t1', 1));
    await waitFor(async () => (await rig.rows()).every((row) => row.status === 'published'), 'the event is marked');
    await waitFor(async () => (await rig.slotInfo())?.activePid != null, 'the relay holds the slot');
    const quiet = await status(rig);
    assert.deepEqual(slotFindings(quiet), []);
    assert.equal(quiet.cdcSlots[0]?.active, true);
    const strict = await status(rig, { cdcRetainedWalWarnBytes: 0 });
    assert.deepEqual(slotFindings(strict), [['cdc-slot-retaining-wal', 'warning', rig.slot]]);
    assert.equal(strict.stalled, false);
  });
});

test('`converge status --cdc-slot`: a missing slot is a stall (exit 2), an idle one a row with its WAL', async () => {
  await withCdcRig(async (rig) => {
    const run = (...args: string[]) =>
      cli(['--database-url', CDC_DATABASE_URL, '--schema', rig.schema, 'status', '--sample-ms', '0', ...args]);
    const missing = await run('--cdc-slot', rig.slot);
    assert.equal(missing.code, 2, missing.stderr);
    assert.match(missing.stdout, new RegExp(`CDC slot ${rig.slot}\\s+STALLED\\s+missing`));
    assert.match(missing.stdout, new RegExp(`converge cdc slot create --slot ${rig.slot}`));
    await rig.createSlot();
    const idle = await run('--cdc-slot', rig.slot, '--json');
    assert.equal(idle.code, 0, idle.stderr);
    const parsed = JSON.parse(idle.stdout) as PipelineStatus;
    assert.deepEqual(slotFindings(parsed), [['cdc-slot-inactive', 'warning', rig.slot]]);
    const table = await run('--cdc-slot', rig.slot);
    assert.match(
      table.stdout,
      new RegExp(`CDC slot ${rig.slot}\\s+WARNING\\s+no relay streams, [\\d.]+ (B|KiB|MiB) WAL retained`),
    );
    const bad = await run('--cdc-slot', rig.slot, '--cdc-wal-warn-bytes', 'lots');
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, /--cdc-wal-warn-bytes.*a whole number of bytes/);
  });
});
