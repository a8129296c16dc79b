import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { horizonFindings } from '../../src/ops/diagnose-horizon.js';
import type { HorizonHolder } from '../../src/ops/facts.js';

const transaction = (ageSeconds: number, state = 'idle in transaction'): HorizonHolder => ({
  kind: 'transaction',
  holder: '777 report-job',
  ageSeconds,
  transactionsBehind: 52_000,
  state,
});

const slot = (state: 'active' | 'inactive', ageSeconds: number | null): HorizonHolder => ({
  kind: 'replication-slot',
  holder: 'standby_1',
  ageSeconds,
  transactionsBehind: 9_000_000,
  state,
});

describe('vacuum horizon findings', () => {
  it('names a transaction holding the horizon as long as the threshold, with its pid, state and lag; not a shorter one', () => {
    assert.deepEqual(horizonFindings({ holders: [transaction(299.9)], warnAfterSeconds: 300 }), []);
    const [finding, ...rest] = horizonFindings({ holders: [transaction(300)], warnAfterSeconds: 300 });
    assert.equal(rest.length, 0);
    assert.equal(finding!.kind, 'vacuum-horizon-held');
    assert.equal(finding!.severity, 'warning');
    assert.equal(finding!.stage, 'database');
    assert.equal(finding!.subject, 'pid 777 report-job');
    assert.match(
      finding!.evidence,
      /^a transaction \(idle in transaction\) has held the xmin horizon for 300 s, 52000 transaction\(s\) behind/,
    );
    assert.match(finding!.lookAt, /idle_in_transaction_session_timeout/);
  });

  it('a prepared transaction is judged by its age like a transaction', () => {
    const prepared: HorizonHolder = {
      kind: 'prepared-transaction',
      holder: 'tx-9',
      ageSeconds: 4_000,
      transactionsBehind: 10,
      state: null,
    };
    const [finding] = horizonFindings({ holders: [prepared], warnAfterSeconds: 300 });
    assert.equal(finding!.subject, 'prepared tx-9');
    assert.match(finding!.lookAt, /ROLLBACK PREPARED/);
  });

  it('an active slot moves on by itself and is never named; an inactive one is, by its age when the server says it (17+), always when not', () => {
    assert.deepEqual(
      horizonFindings({ holders: [slot('active', null), slot('active', 10_000)], warnAfterSeconds: 300 }),
      [],
    );
    assert.deepEqual(horizonFindings({ holders: [slot('inactive', 10)], warnAfterSeconds: 300 }), []);
    assert.equal(horizonFindings({ holders: [slot('inactive', 301)], warnAfterSeconds: 300 }).length, 1);
    const [unknownAge] = horizonFindings({ holders: [slot('inactive', null)], warnAfterSeconds: 300 });
    assert.equal(unknownAge!.subject, 'slot standby_1');
    assert.match(
      unknownAge!.evidence,
      /^inactive replication slot has held the xmin horizon, 9000000 transaction\(s\) behind/,
    );
  });

  it('each holder over the threshold is its own finding', () => {
    const findings = horizonFindings({
      holders: [transaction(900), transaction(10), slot('inactive', null)],
      warnAfterSeconds: 300,
    });
    assert.deepEqual(
      findings.map((f) => f.subject),
      ['pid 777 report-job', 'slot standby_1'],
    );
  });
});
