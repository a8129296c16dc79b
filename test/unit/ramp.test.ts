import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { RampGate, rampLimit, DEFAULT_RAMP_UP } from '../../src/inbox/ramp.js';

describe('rampLimit', () => {
  it('starts at the initial rate, multiplies per step and lifts the limit at the ceiling', () => {
    const policy = { initialPerSecond: 100, factor: 2, stepMs: 1_000, untilPerSecond: 1_000 };
    assert.deepEqual(
      [0, 999, 1_000, 2_500, 3_000, 3_999, 4_000].map((ms) => rampLimit(ms, policy)),
      [100, 100, 200, 400, 800, 800, null],
    );
  });

  it('with a factor of 1 never lifts below the ceiling, and the default lifts within 7 s', () => {
    assert.equal(rampLimit(1e9, { initialPerSecond: 5, factor: 1, stepMs: 10, untilPerSecond: 10 }), 5);
    assert.equal(rampLimit(6_999, DEFAULT_RAMP_UP), 6_400);
    assert.equal(rampLimit(7_000, DEFAULT_RAMP_UP), null);
  });
});

describe('RampGate', () => {
  const clock = () => {
    let t = 0;
    return { now: () => t, advance: (ms: number) => (t += ms) };
  };

  it('grants everything when not ramping', () => {
    const gate = new RampGate(DEFAULT_RAMP_UP);
    assert.deepEqual(gate.take(500), { granted: 500, waitMs: 0 });
    assert.equal(gate.limit(), null);
  });

  it('holds the rate: a burst of a tenth of a second, then rate × time, and says how long to wait', () => {
    const time = clock();
    const gate = new RampGate({ initialPerSecond: 100, factor: 2, stepMs: 1_000, untilPerSecond: 1_000 }, time.now);
    gate.begin();
    assert.deepEqual(gate.take(128), { granted: 10, waitMs: 0 }, 'burst of 10 at 100/s');
    assert.deepEqual(gate.take(128), { granted: 0, waitMs: 10 });
    time.advance(50);
    assert.equal(gate.take(128).granted, 5);
    let granted = 15;
    for (let ms = 50; ms < 950; ms += 10) {
      time.advance(10);
      granted += gate.take(128).granted;
    }
    assert.ok(granted <= 10 + 100 * 0.95, `${granted} events in 0.95 s at 100/s`);
    assert.ok(granted >= 90, `the limit is a rate, not a stop (${granted})`);
  });

  it('rises step by step and ends, and begin() restarts it from the initial rate', () => {
    const time = clock();
    const gate = new RampGate({ initialPerSecond: 100, factor: 2, stepMs: 1_000, untilPerSecond: 1_000 }, time.now);
    gate.begin();
    assert.equal(gate.limit(), 100);
    time.advance(2_000);
    assert.equal(gate.limit(), 400);
    time.advance(2_000);
    assert.equal(gate.limit(), null);
    assert.deepEqual(gate.take(300), { granted: 300, waitMs: 0 });
    gate.begin();
    assert.equal(gate.limit(), 100);
  });
});
