import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import type http from 'node:http';
import { describe, test } from 'node:test';
import { Ring } from '../../src/dashboard/history.js';
import { startSampler } from '../../src/dashboard/sampler.js';
import { hostMatcher, isJson, sameOrigin, tokenMatches } from '../../src/dashboard/guard.js';
import { ASSETS } from '../../src/dashboard/assets/index.js';
import { axisTicks, clockText } from '../../src/dashboard/client/format.js';
import { BUNDLE_MODULE, renderBundleModule } from '../../scripts/dashboard/build.js';
import type { HistoryPoint } from '../../src/dashboard/history.js';
import type * as Page from '../../src/dashboard/client/types.js';
import type { PipelineStatus, QuarantineSummary } from '../../src/ops/index.js';

// The page declares its own view of the API (its program cannot import server modules); these
// assignments make tsc hold that view to what the server sends, after JSON turns Dates into strings.
export const statusView = (status: PipelineStatus): Page.PipelineStatus => status;
export const historyView = (point: HistoryPoint): Page.HistoryPoint => point;
export const quarantineView = (row: QuarantineSummary): Page.QuarantineRow => ({
  ...row,
  resolvedAt: row.resolvedAt?.toISOString() ?? null,
});

const req = (headers: http.IncomingHttpHeaders) => ({ headers }) as http.IncomingMessage;

describe('dashboard history ring', () => {
  test('keeps the newest `capacity` items, oldest first', () => {
    const ring = new Ring<number>(3);
    assert.deepEqual(ring.toArray(), []);
    for (const n of [1, 2]) ring.push(n);
    assert.deepEqual(ring.toArray(), [1, 2]);
    for (const n of [3, 4, 5, 6, 7]) ring.push(n);
    assert.deepEqual(ring.toArray(), [5, 6, 7]);
    assert.throws(() => new Ring(0), RangeError);
  });
});

describe('dashboard request checks', () => {
  test('Host: the bound loopback address and its aliases on the bound port, nothing else', () => {
    const allowed = hostMatcher('127.0.0.1', 7780);
    for (const host of ['127.0.0.1:7780', 'localhost:7780', '[::1]:7780']) assert.ok(allowed(host), host);
    for (const host of [undefined, '', '127.0.0.1:7781', '127.0.0.1', 'evil.example:7780', 'user@127.0.0.1:7780'])
      assert.ok(!allowed(host), String(host));
  });

  test('Host: bound to a wildcard, only IP literals and localhost (a rebound DNS name is refused)', () => {
    const allowed = hostMatcher('0.0.0.0', 80);
    assert.ok(allowed('10.1.2.3'));
    assert.ok(allowed('localhost:80'));
    assert.ok(!allowed('evil.example'));
    const named = hostMatcher('ops.internal', 7780);
    assert.ok(named('ops.internal:7780'));
    assert.ok(!named('localhost:7780'));
  });

  test('same origin: Origin must be this server, Sec-Fetch-Site same-origin or none; absent headers pass', () => {
    const host = '127.0.0.1:7780';
    assert.ok(sameOrigin(req({ host })));
    assert.ok(sameOrigin(req({ host, origin: 'http://127.0.0.1:7780', 'sec-fetch-site': 'same-origin' })));
    assert.ok(!sameOrigin(req({ host, origin: 'http://evil.example' })));
    assert.ok(!sameOrigin(req({ host, origin: 'null' })));
    assert.ok(!sameOrigin(req({ host, 'sec-fetch-site': 'same-site' })));
    assert.ok(!sameOrigin(req({ host, 'sec-fetch-site': 'cross-site' })));
  });

  test('actions take JSON only', () => {
    assert.ok(isJson(req({ 'content-type': 'application/json; charset=utf-8' })));
    for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data', undefined])
      assert.ok(!isJson(req({ 'content-type': type })), String(type));
  });

  test('token: exact match only, any length', () => {
    assert.ok(tokenMatches('s3cret-token-value', 's3cret-token-value'));
    for (const given of [undefined, '', 's3cret', 's3cret-token-valuE', 's3cret-token-value ', ['s3cret-token-value']])
      assert.ok(!tokenMatches('s3cret-token-value', given), String(given));
  });
});

describe('dashboard assets', () => {
  test('the page loads only its own assets: no CDN, no inline script or style', () => {
    const page = ASSETS['/']!.body;
    for (const src of page.matchAll(/(?:src|href)="([^"]+)"/g)) assert.ok(ASSETS[src[1]!], `${src[1]} is served`);
    assert.doesNotMatch(page, /<script>|<style|style="/);
    assert.doesNotMatch(ASSETS['/assets/app.js']!.body, /innerHTML|eval\(|new Function/);
  });

  test('the committed bundle.ts is what src/dashboard/client bundles to (else: npm run dashboard:build)', async () => {
    assert.equal(readFileSync(BUNDLE_MODULE, 'utf8'), await renderBundleModule());
    // One classic script: no module syntax left for the browser to choke on.
    assert.doesNotMatch(ASSETS['/assets/app.js']!.body, /^\s*(import|export)\s/m);
  });
});

describe('dashboard clock and axis', () => {
  const at = Date.UTC(2026, 11, 6, 3, 40, 12, 900);

  test('the clock shows the date, the time to the second and the zone', () => {
    assert.equal(clockText(at, 0), '2026-12-06 03:40:12 UTC');
    assert.equal(clockText(at, 330), '2026-12-06 09:10:12 UTC+05:30');
    // West of UTC the date can be the day before: the date is the zone's, not UTC's.
    assert.equal(clockText(at, -300), '2026-12-05 22:40:12 UTC-05:00');
    assert.equal(clockText(Date.UTC(2026, 0, 1, 0, 0, 0), -570), '2025-12-31 14:30:00 UTC-09:30');
  });

  test('count axes tick in whole numbers, a step of 1, 2 or 5 × 10^n, up to the maximum or just above', () => {
    assert.deepEqual(axisTicks(0, true), [0, 1]);
    assert.deepEqual(axisTicks(1, true), [0, 1]);
    assert.deepEqual(axisTicks(3, true), [0, 1, 2, 3]);
    assert.deepEqual(axisTicks(7, true), [0, 2, 4, 6, 8]);
    assert.deepEqual(axisTicks(10, true), [0, 2, 4, 6, 8, 10]);
    assert.deepEqual(axisTicks(11, true), [0, 5, 10, 15]);
    assert.deepEqual(axisTicks(1234, true), [0, 500, 1000, 1500]);
    for (let max = 0; max <= 5000; max += max < 50 ? 1 : 37) {
      const ticks = axisTicks(max, true);
      const step = ticks[1]! - ticks[0]!;
      assert.ok(
        ticks.every((t) => Number.isInteger(t)),
        `max ${max}: ${ticks.join(', ')}`,
      );
      assert.match(String(step), /^[125]0*$/, `max ${max}: step ${step}`);
      assert.ok(ticks.at(-1)! >= max && ticks.at(-2)! < Math.max(max, 1), `max ${max}: ${ticks.join(', ')}`);
      assert.ok(ticks.length <= 6, `max ${max}: ${ticks.length} ticks`);
    }
  });

  test('a rate or a duration keeps decimal ticks, without float noise', () => {
    assert.deepEqual(axisTicks(1, false), [0, 0.2, 0.4, 0.6, 0.8, 1]);
    assert.deepEqual(axisTicks(0.7, false), [0, 0.2, 0.4, 0.6, 0.8]);
    assert.deepEqual(axisTicks(0.003, false), [0, 0.001, 0.002, 0.003]);
    assert.deepEqual(axisTicks(0, false), [0, 1]);
    assert.deepEqual(axisTicks(Number.NaN, false), [0, 1]);
  });
});

/** A status reader whose reads the test settles one by one; counts reads and overlaps. */
function scriptedReader() {
  const reads: ((pending: number) => void)[] = [];
  let active = 0;
  let overlapped = false;
  const read = () =>
    new Promise<PipelineStatus>((resolve) => {
      active += 1;
      if (active > 1) overlapped = true;
      reads.push((pending) => {
        active -= 1;
        resolve({
          checkedAt: new Date(0).toISOString(),
          outbox: { pending, failed: 0, oldestPendingAgeSeconds: null },
          failures: { quarantined: {} },
          gaps: { parked: 0 },
          lag: [],
        } as unknown as PipelineStatus);
      });
    });
  return { read, reads, overlapped: () => overlapped };
}

const silent = { debug() {}, info() {}, warn() {}, error() {} };
/** Lets settled reads run their continuations (setImmediate is not among the mocked timers). */
const settle = () => new Promise((resolve) => setImmediate(resolve));

describe('dashboard sampler refresh', () => {
  test('a refresh waits for the read in flight, then reads once more: never two reads at once', async () => {
    const reader = scriptedReader();
    const sampler = startSampler(reader.read, 60_000, 10, silent);
    await settle();
    assert.equal(reader.reads.length, 1, 'the first sample is in flight');
    let refreshed = false;
    const refresh = sampler.refresh().then(() => (refreshed = true));
    await settle();
    assert.equal(reader.reads.length, 1, 'no second read while the first is in flight');
    reader.reads[0]!(1);
    await settle();
    assert.equal(reader.reads.length, 2, 'the refresh reads after the first settled');
    assert.equal(refreshed, false, 'and answers only once its own read settled');
    assert.equal(sampler.latest()?.outbox.pending, 1);
    reader.reads[1]!(2);
    await refresh;
    assert.equal(sampler.latest()?.outbox.pending, 2, 'the refresh read is the latest');
    assert.equal(sampler.history().length, 2);
    assert.equal(reader.overlapped(), false);
    await sampler.stop();
  });

  test('a refresh replaces the next tick: the interval restarts from it and one timer stays armed', async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout'] });
    const reader = scriptedReader();
    const sampler = startSampler(reader.read, 1_000, 10, silent);
    await settle();
    reader.reads[0]!(0);
    await settle();
    t.mock.timers.tick(600);
    const refresh = sampler.refresh();
    await settle();
    assert.equal(reader.reads.length, 2, 'the refresh reads at once');
    // The tick armed before the refresh comes due while the refresh read is in flight.
    t.mock.timers.tick(400);
    await settle();
    reader.reads[1]!(0);
    await refresh;
    await settle();
    assert.equal(reader.reads.length, 2, 'the earlier tick was cancelled, not queued behind the refresh');
    t.mock.timers.tick(999);
    await settle();
    assert.equal(reader.reads.length, 2);
    t.mock.timers.tick(1);
    await settle();
    assert.equal(reader.reads.length, 3, 'one tick, an interval after the refresh settled');
    reader.reads[2]!(0);
    await settle();
    t.mock.timers.tick(1_000);
    await settle();
    assert.equal(reader.reads.length, 4, 'one read per interval, not two');
    reader.reads[3]!(0);
    await settle();
    await sampler.stop();
    t.mock.timers.tick(10_000);
    await settle();
    assert.equal(reader.reads.length, 4, 'nothing after stop');
    await sampler.refresh();
    assert.equal(reader.reads.length, 4, 'a refresh after stop reads nothing');
    assert.equal(reader.overlapped(), false);
  });
});
