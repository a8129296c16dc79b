import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  coveredUntil,
  intervalStart,
  partitionName,
  partitionsToCreate,
  pastRetention,
  type PartitionRange,
} from '../../src/schema/partition-plan.js';
import { legacyIndexName } from '../../src/schema/partitioning.js';
import { partitionFindings } from '../../src/ops/partition-facts.js';

const DAY = 86_400_000;
const dec7 = Date.UTC(2026, 11, 7);

function day(fromMs: number): PartitionRange {
  return { name: partitionName('outbox', fromMs), fromMs, toMs: fromMs + DAY };
}

describe('partition plan', () => {
  it('aligns intervals to the Unix epoch in UTC and names a partition after its start', () => {
    assert.equal(intervalStart(dec7 + 5 * 3_600_000, DAY), dec7);
    assert.equal(partitionName('outbox', dec7), 'outbox_p20261207t000000');
    assert.equal(partitionName('inbox', dec7 + 2_000), 'inbox_p20261207t000002');
  });

  it('creates the current interval and `ahead` more, skipping what exists or the converted table covers', () => {
    const now = dec7 + 3_600_000;
    assert.deepEqual(partitionsToCreate([], now, DAY, 2), [dec7, dec7 + DAY, dec7 + 2 * DAY]);
    assert.deepEqual(partitionsToCreate([day(dec7)], now, DAY, 2), [dec7 + DAY, dec7 + 2 * DAY]);
    const legacy: PartitionRange = { name: 'outbox_legacy', fromMs: null, toMs: dec7 + DAY };
    assert.deepEqual(partitionsToCreate([legacy, day(dec7 + DAY)], now, DAY, 2), [dec7 + 2 * DAY]);
    assert.deepEqual(partitionsToCreate([legacy, day(dec7 + DAY), day(dec7 + 2 * DAY)], now, DAY, 2), []);
  });

  it('says how far the partitions reach from now without a gap, or null when none covers now', () => {
    const legacy: PartitionRange = { name: 'outbox_legacy', fromMs: null, toMs: dec7 + DAY };
    assert.equal(coveredUntil([day(dec7 + DAY), legacy, day(dec7 + 3 * DAY)], dec7 + 5), dec7 + 2 * DAY);
    assert.equal(coveredUntil([day(dec7 + DAY)], dec7 + 5), null);
    assert.equal(coveredUntil([], dec7), null);
  });

  it('lets retention look only at partitions whose whole range ended `retention` ago', () => {
    const ranges = [day(dec7 - 2 * DAY), day(dec7 - DAY), day(dec7)];
    const due = pastRetention(ranges, dec7 + 1_000, DAY);
    assert.deepEqual(
      due.map((r) => r.name),
      [partitionName('outbox', dec7 - 2 * DAY)],
    );
    assert.deepEqual(pastRetention(ranges, dec7 + DAY, 0).length, 3);
  });

  it('renames the converted table’s indexes so the parent can take their names', () => {
    assert.equal(legacyIndexName('outbox_pending_idx', 'outbox'), 'outbox_legacy_pending_idx');
    const long = legacyIndexName('outbox_aggregate_type_aggregate_id_aggregate_version_key', 'outbox');
    assert.ok(long.length <= 63);
  });
});

describe('partition findings', () => {
  const base = { table: 'outbox' as const, intervalMs: DAY, ahead: 3, partitions: 4, nowMs: dec7 };

  it('says nothing while the partitions reach at least one interval ahead', () => {
    assert.deepEqual(partitionFindings([{ ...base, coveredUntilMs: dec7 + DAY }]), []);
  });

  it('warns when less than one interval is left, and stalls when nothing covers now', () => {
    const [warning] = partitionFindings([{ ...base, coveredUntilMs: dec7 + DAY - 1 }]);
    assert.equal(warning?.kind, 'partitions-not-ahead');
    assert.equal(warning?.severity, 'warning');
    const [stalled] = partitionFindings([{ ...base, table: 'inbox', coveredUntilMs: null }]);
    assert.equal(stalled?.severity, 'stalled');
    assert.equal(stalled?.subject, 'inbox');
  });
});
