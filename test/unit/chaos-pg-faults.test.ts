/** chaos --pg: one PostgreSQL setup per run, chosen by the flag or by the faults named, and faults drawn only where they can run. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { faultKindsFor } from '../../chaos/cluster-faults.js';
import { FAILOVER_FAULTS } from '../../chaos/failover-faults.js';
import { drawableIn, pgMode, PG_FAULTS } from '../../chaos/pg-faults.js';
import { POOLER_FAULTS } from '../../chaos/pooler-faults.js';
import { FAULT_KINDS, FAULT_WEIGHTS, faultBag, seededRandom } from '../../chaos/schedule.js';

test('--pg picks the mode; a fault named in --faults picks the mode it needs', () => {
  assert.equal(pgMode(undefined, undefined), 'shared');
  assert.equal(pgMode('shared', ['kill-relay']), 'shared');
  assert.equal(pgMode('embedded', undefined), 'embedded');
  assert.equal(pgMode('pooler', undefined), 'pooler');
  assert.equal(pgMode(undefined, ['pg-restart-fast', 'kill-consumer']), 'embedded');
  assert.equal(pgMode(undefined, ['restart-pooler', 'kill-relay', 'kill-consumer']), 'pooler');
  assert.equal(pgMode('pooler', ['kill-relay']), 'pooler');
  assert.equal(pgMode('pooler', undefined, 'exclusive'), 'pooler');
});

test('--pg refuses an unknown mode and combinations no run can honour, saying why', () => {
  assert.throws(() => pgMode('bouncer', undefined), /--pg must be shared, embedded, pooler, failover, not bouncer/);
  assert.throws(() => pgMode('shared', ['pg-restart-fast']), /need --pg embedded/);
  assert.throws(() => pgMode('shared', ['restart-pooler']), /need --pg pooler/);
  assert.throws(() => pgMode('embedded', ['restart-pooler']), /one --pg mode per run/);
  assert.throws(() => pgMode('pooler', ['pg-restart-immediate']), /one --pg mode per run/);
  assert.throws(() => pgMode(undefined, ['pg-restart-fast', 'restart-pooler']), /one --pg mode per run/);
  assert.throws(() => pgMode('embedded', undefined, 'cdc'), /--relay cdc runs on CDC_DATABASE_URL/);
  assert.throws(() => pgMode('pooler', undefined, 'cdc'), /replication connection/);
  assert.throws(() => pgMode(undefined, ['restart-pooler'], 'cdc'), /replication connection/);
  // A CDC run on the shared servers stays allowed.
  assert.equal(pgMode(undefined, ['kill-relay'], 'cdc'), 'shared');
});

test('PG restarts are drawn only on the run’s own server, pooler restarts only through the run’s own pooler', () => {
  for (const kind of PG_FAULTS) {
    assert.ok(drawableIn('embedded', kind));
    assert.ok(!drawableIn('shared', kind));
    assert.ok(!drawableIn('pooler', kind));
  }
  for (const kind of POOLER_FAULTS) {
    assert.ok(drawableIn('pooler', kind));
    assert.ok(!drawableIn('shared', kind));
    assert.ok(!drawableIn('embedded', kind));
  }
  // Every other fault keeps running in every mode (terminate-backends and the kills through the pooler too).
  const special = new Set<string>([...PG_FAULTS, ...POOLER_FAULTS, ...FAILOVER_FAULTS]);
  for (const kind of FAULT_KINDS.filter((k) => !special.has(k)))
    for (const mode of ['shared', 'embedded', 'pooler', 'failover'] as const)
      assert.ok(drawableIn(mode, kind), `${kind} ${mode}`);
});

test('a pooler run meets the pooler restart within one bag; a shared run never draws it', () => {
  // As chaos/run.ts builds a run's kinds without --faults (and without --cluster).
  const pooler = faultKindsFor(
    false,
    FAULT_KINDS.filter((k) => drawableIn('pooler', k)),
  );
  const shared = faultKindsFor(
    false,
    FAULT_KINDS.filter((k) => drawableIn('shared', k)),
  );
  const bagLength = pooler.reduce((sum, kind) => sum + FAULT_WEIGHTS[kind], 0);
  for (let seed = 1; seed <= 50; seed++) {
    const next = faultBag(seededRandom(seed), pooler);
    const drawn = Array.from({ length: bagLength }, () => next());
    assert.ok(drawn.includes('restart-pooler'), `seed ${seed}`);
    const nextShared = faultBag(seededRandom(seed), shared);
    for (let i = 0; i < 40; i++) assert.ok(!POOLER_FAULTS.includes(nextShared() as never), `seed ${seed}`);
  }
});
