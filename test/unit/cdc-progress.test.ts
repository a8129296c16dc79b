import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { CdcProgress } from '../../src/relay/cdc/progress.js';
import { formatLsn, lsnBefore, parseLsn } from '../../src/relay/cdc/lsn.js';

/** Transactions with their events, as the stream delivers them. */
function feed(progress: CdcProgress, transactions: [lsn: string, keys: string[]][], now = 0): void {
  for (const [lsn, keys] of transactions) {
    progress.begin(lsn);
    for (const key of keys) progress.add(key, now);
    progress.commit();
  }
}

describe('CdcProgress', () => {
  it('acknowledges nothing before the first transaction is committed and confirmed', () => {
    const progress = new CdcProgress();
    assert.equal(progress.ackable(), undefined);
    progress.begin('0/100');
    progress.add('a', 0);
    progress.confirm('a');
    assert.equal(progress.ackable(), undefined, 'still open: more events may join it');
    progress.commit();
    assert.equal(progress.ackable(), '0/100');
  });

  it('advances only over a prefix of fully confirmed transactions, whatever the confirm order', () => {
    const progress = new CdcProgress();
    feed(progress, [
      ['0/100', ['a1', 'a2']],
      ['0/200', ['b1']],
      ['0/300', ['c1', 'c2']],
    ]);
    progress.confirm('c1');
    progress.confirm('c2');
    progress.confirm('b1');
    assert.equal(progress.ackable(), undefined, 'the first transaction still waits for a2 and a1');
    progress.confirm('a2');
    assert.equal(progress.ackable(), undefined);
    progress.confirm('a1');
    assert.equal(progress.ackable(), '0/300');
  });

  it('stops for good at a rejected event: nothing after it is acknowledged', () => {
    const progress = new CdcProgress();
    feed(progress, [
      ['0/100', ['a']],
      ['0/200', ['b', 'c']],
      ['0/300', ['d']],
    ]);
    progress.confirm('a');
    progress.reject('b');
    progress.confirm('c');
    progress.confirm('d');
    assert.equal(progress.ackable(), '0/100');
    progress.confirm('b'); // a late answer for a rejected event changes nothing
    assert.equal(progress.ackable(), '0/100');
  });

  it('counts a transaction without outbox events as done once committed', () => {
    const progress = new CdcProgress();
    feed(progress, [['0/100', []]]);
    assert.equal(progress.ackable(), '0/100');
    assert.equal(progress.settled, true);
  });

  it('reports unconfirmed events and the age of the oldest one', () => {
    const progress = new CdcProgress();
    progress.begin('0/100');
    progress.add('a', 1_000);
    progress.add('b', 1_500);
    assert.equal(progress.unconfirmed, 2);
    assert.equal(progress.settled, false);
    assert.equal(progress.oldestUnconfirmedAgeMs(3_000), 2_000);
    progress.confirm('a');
    assert.equal(progress.oldestUnconfirmedAgeMs(3_000), 1_500);
    progress.confirm('b');
    assert.equal(progress.oldestUnconfirmedAgeMs(3_000), 0);
    assert.equal(progress.settled, false, 'the transaction is still open');
    progress.commit();
    assert.equal(progress.settled, true);
  });

  it('refuses a stream out of shape', () => {
    const progress = new CdcProgress();
    assert.throws(() => progress.add('a', 0), /outside a transaction/);
    assert.throws(() => progress.commit(), /without a transaction/);
    progress.begin('0/200');
    assert.throws(() => progress.begin('0/300'), /inside an open transaction/);
    progress.add('a', 0);
    assert.throws(() => progress.add('a', 0), /already pending/);
    progress.commit();
    assert.throws(() => progress.begin('0/100'), /does not follow/);
  });

  it('never acknowledges past an unconfirmed event, for any confirm order (property)', () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 0, max: 4 }), { minLength: 1, maxLength: 12 }),
        fc.func(fc.integer()),
        (sizes, order) => {
          const progress = new CdcProgress();
          const transactions = sizes.map((size, t): [string, string[]] => [
            formatLsn(BigInt(t + 1) * 0x100n),
            Array.from({ length: size }, (_, e) => `${t}:${e}`),
          ]);
          feed(progress, transactions);
          const keys = transactions.flatMap(([, k]) => k).sort((a, b) => order(a) - order(b) || a.localeCompare(b));
          const confirmed = new Set<string>();
          for (const key of keys) {
            progress.confirm(key);
            confirmed.add(key);
            const ackable = progress.ackable();
            // Expected: the last transaction of the longest fully confirmed prefix.
            let expected: string | undefined;
            for (const [lsn, k] of transactions) {
              if (!k.every((x) => confirmed.has(x))) break;
              expected = lsn;
            }
            assert.equal(ackable, expected);
          }
          assert.equal(progress.ackable(), transactions.at(-1)![0]);
        },
      ),
    );
  });
});

describe('lsn', () => {
  it('parses, formats and steps back across the 32-bit boundary', () => {
    assert.equal(parseLsn('16/B374D848'), (0x16n << 32n) | 0xb374d848n);
    assert.equal(formatLsn(parseLsn('16/B374D848')), '16/B374D848');
    assert.equal(lsnBefore('1/0'), '0/FFFFFFFF');
    assert.equal(lsnBefore('0/0'), '0/0');
    assert.throws(() => parseLsn('nope'), /not an LSN/);
  });
});
