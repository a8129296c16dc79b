/** chaos --pg failover: the mode, where pg-failover may be drawn, and that a run draws it at most once and still ends. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { faultKindsFor } from '../../chaos/cluster-faults.js';
import { FAILOVER_FAULTS, isFailoverFault } from '../../chaos/failover-faults.js';
import { drawableIn, pgMode, PG_FAULTS } from '../../chaos/pg-faults.js';
import { POOLER_FAULTS } from '../../chaos/pooler-faults.js';
import {
  everyKindRan,
  FAULT_KINDS,
  FAULT_WEIGHTS,
  faultBag,
  ONCE_PER_RUN,
  seededRandom,
  type FaultKind,
} from '../../chaos/schedule.js';

/** As chaos/run.ts builds a failover run's kinds without --faults (and without --cluster). */
const failoverKinds = faultKindsFor(
  false,
  FAULT_KINDS.filter((k) => drawableIn('failover', k)),
);

test('--pg failover, or pg-failover named in --faults, picks the failover mode', () => {
  assert.equal(pgMode('failover', undefined), 'failover');
  assert.equal(pgMode(undefined, ['pg-failover', 'kill-relay']), 'failover');
  assert.equal(pgMode('failover', ['kill-consumer', 'terminate-backends']), 'failover');
  assert.equal(pgMode('failover', undefined, 'exclusive'), 'failover');
  // The pair has wal_level=logical; the CDC relays' slot is then a failover slot.
  assert.equal(pgMode('failover', undefined, 'cdc'), 'failover');
});

test('--pg failover refuses other modes’ faults and the shared server, saying which fault needs what', () => {
  assert.throws(() => pgMode('shared', ['pg-failover']), /pg-failover needs --pg failover/);
  assert.throws(() => pgMode('failover', ['pg-restart-fast']), /one --pg mode per run/);
  assert.throws(() => pgMode('failover', ['restart-pooler']), /one --pg mode per run/);
  assert.throws(() => pgMode('embedded', ['pg-failover']), /PG restart faults need --pg embedded and pg-failover/);
  assert.throws(() => pgMode('pooler', ['pg-failover']), /pooler faults need --pg pooler and pg-failover/);
  assert.throws(() => pgMode(undefined, ['pg-failover', 'restart-pooler']), /one --pg mode per run/);
});

test('pg-failover is drawn only on the run’s own pair; every other fault but the PG and pooler restarts runs there too', () => {
  assert.deepEqual([...FAILOVER_FAULTS], ['pg-failover']);
  assert.ok(isFailoverFault('pg-failover'));
  assert.ok(!isFailoverFault('pg-restart-immediate'));
  for (const mode of ['shared', 'embedded', 'pooler'] as const) assert.ok(!drawableIn(mode, 'pg-failover'), mode);
  assert.ok(drawableIn('failover', 'pg-failover'));
  for (const kind of [...PG_FAULTS, ...POOLER_FAULTS]) assert.ok(!drawableIn('failover', kind), kind);
  for (const kind of [
    'kill-relay',
    'kill-consumer',
    'relay-dies-after-confirm',
    'consumer-dies-after-commit',
    'close-amqp-connections',
    'restart-broker',
    'terminate-backends',
    'hold-hot-row-lock',
    'duplicate-storm',
    'slow-consumer',
    'bad-message',
  ] as const)
    assert.ok(failoverKinds.includes(kind), kind);
  assert.ok(failoverKinds.includes('pg-failover'));
});

test('a failover run draws pg-failover exactly once over many bags, whatever the seed', () => {
  assert.ok(ONCE_PER_RUN.has('pg-failover'));
  const bagLength = failoverKinds.reduce((sum, kind) => sum + FAULT_WEIGHTS[kind], 0);
  for (let seed = 1; seed <= 200; seed++) {
    const next = faultBag(seededRandom(seed), failoverKinds);
    const drawn = Array.from({ length: bagLength * 6 }, () => next());
    assert.equal(drawn.filter((kind) => kind === 'pg-failover').length, 1, `seed ${seed}`);
    // In the first bag, like any kind: a short run meets it.
    assert.ok(drawn.slice(0, bagLength).includes('pg-failover'), `seed ${seed}`);
    // The other kinds keep coming, a whole bag's worth each time.
    assert.ok(!drawn.includes(undefined), `seed ${seed}`);
    for (const kind of failoverKinds) assert.ok(drawn.includes(kind), `${kind} seed ${seed}`);
  }
});

test('deferring every other kind never brings pg-failover back, and a refill leaves it out', () => {
  for (let seed = 1; seed <= 100; seed++) {
    const next = faultBag(seededRandom(seed), ['pg-failover', 'kill-relay', 'restart-broker']);
    const everythingElse = new Set<FaultKind>(['kill-relay', 'restart-broker']);
    // While every other kind is deferred the bag offers what it holds, pg-failover among it, once.
    const drawn = Array.from({ length: 40 }, (_, i) => next(i % 2 === 0 ? everythingElse : new Set()));
    assert.equal(drawn.filter((kind) => kind === 'pg-failover').length, 1, `seed ${seed}`);
  }
});

test('a run of only pg-failover draws it once, then nothing: the loop idles instead of failing over again', () => {
  const next = faultBag(seededRandom(7), ['pg-failover']);
  assert.equal(next(), 'pg-failover');
  for (let i = 0; i < 5; i++) assert.equal(next(), undefined);
  // Even while it is deferred, the one draw is the one failover.
  const deferred = faultBag(seededRandom(7), ['pg-failover']);
  assert.equal(deferred(new Set(['pg-failover'])), 'pg-failover');
  assert.equal(deferred(new Set(['pg-failover'])), undefined);
});

test('--every-kind ends: the schedule meets each kind once, pg-failover included, within a bounded number of faults', () => {
  const bagLength = failoverKinds.reduce((sum, kind) => sum + FAULT_WEIGHTS[kind], 0);
  for (let seed = 1; seed <= 200; seed++) {
    const random = seededRandom(seed);
    const next = faultBag(random, failoverKinds);
    const counts: Partial<Record<FaultKind, number>> = {};
    let faults = 0;
    // As chaos/run.ts's loop: a restart-broker stays deferred for a while after it ran.
    let brokerRestartedAt = -Infinity;
    while (!everyKindRan(failoverKinds, counts)) {
      assert.ok(faults < bagLength * 3, `seed ${seed}: --every-kind still running after ${faults} faults`);
      const kind = next(new Set(faults - brokerRestartedAt < 10 ? (['restart-broker'] as const) : []));
      if (kind === undefined) continue;
      if (kind === 'restart-broker') brokerRestartedAt = faults;
      counts[kind] = (counts[kind] ?? 0) + 1;
      faults++;
    }
    assert.equal(counts['pg-failover'], 1, `seed ${seed}`);
  }
});

test('everyKindRan counts a kind that ran once as done, and a missing one as not', () => {
  assert.ok(everyKindRan([], {}));
  assert.ok(everyKindRan(['pg-failover', 'kill-relay'], { 'pg-failover': 1, 'kill-relay': 3 }));
  assert.ok(!everyKindRan(['pg-failover', 'kill-relay'], { 'kill-relay': 3 }));
  assert.ok(!everyKindRan(['pg-failover'], { 'pg-failover': 0 }));
});

test('a run without pg-failover draws the same faults as before the once-per-run rule', () => {
  // The rule must not change the replay of existing seeds: no once-per-run kind, the same sequence.
  const kinds = FAULT_KINDS.filter((k) => drawableIn('shared', k));
  for (const seed of [1, 20261202, 20261203]) {
    const withRule = faultBag(seededRandom(seed), kinds);
    const without = faultBag(seededRandom(seed), kinds, new Set());
    for (let i = 0; i < 60; i++) assert.equal(withRule(), without(), `seed ${seed} draw ${i}`);
  }
});
