/** bench/report.ts: the figures derived within one run and how targets are judged from them. */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { derivedFigures, evaluateTargets } from '../../bench/report.js';

describe('bench report', () => {
  test('ratios and the latency differences compare figures of the same run', () => {
    const d = derivedFigures(
      {
        relay_drain: 9_000,
        raw_publish_same_shape: 10_000,
        consumer_apply: 7_000,
        naive_consumer_apply: 10_000,
        e2e_sustained: 6_000,
        naive_pipeline: 8_000,
        raw_publish: 12_000,
        e2e_latency_1000_p50_ms: 21,
        naive_latency_1000_p50_ms: 18,
        e2e_latency_1000_p99_ms: 60,
        naive_latency_1000_p99_ms: 40,
      },
      { raw_consume: [20_000, 40_000, 70_000] },
    );
    assert.equal(d.relay_vs_raw_publish_same_shape, 0.9);
    assert.equal(d.consumer_vs_naive_consumer, 0.7);
    assert.equal(d.e2e_vs_naive, 0.75);
    assert.equal(d.e2e_vs_raw_publish, 0.5);
    assert.equal(d.e2e_latency_1000_p50_over_naive_ms, 3);
    assert.equal(d.e2e_latency_1000_p99_vs_naive, 1.5);
    assert.equal(d.raw_consume_spread, 50_000 / 40_000);
  });

  test('CPU per event: cores kept busy and the rate ratio CPU allows', () => {
    const d = derivedFigures(
      {
        naive_pipeline: 8_000,
        naive_pipeline_cpu_ms: 0.25,
        e2e_sustained: 4_000,
        e2e_sustained_cpu_ms: 0.5,
        cdc_e2e_sustained: 2_000,
        cdc_e2e_sustained_cpu_ms: 0.75,
      },
      {},
    );
    assert.equal(d.cdc_e2e_sustained_cores_busy, 1.5);
    assert.equal(d.cdc_e2e_vs_naive, 0.25);
    assert.equal(d.naive_pipeline_cores_busy, 2);
    assert.equal(d.e2e_sustained_cores_busy, 2);
    assert.equal(d.e2e_vs_naive_cpu_bound, 0.5);
  });

  test('drains: the CPU-bound consumer ratio and what round trips cost per event', () => {
    const d = derivedFigures(
      {
        naive_consumer_apply_cpu_ms: 0.1,
        consumer_apply_cpu_ms: 0.2,
        relay_drain_statements_per_1000_events: 3,
        consumer_apply_statements_per_1000_events: 20,
        raw_pg_round_trip_us: 100,
      },
      {},
    );
    assert.equal(d.consumer_vs_naive_consumer_cpu_bound, 0.5);
    assert.equal(d.relay_round_trip_us_per_event, 0.3);
    assert.equal(d.consumer_round_trip_us_per_event, 2);
  });

  test('a figure with a side missing is missing, never zero; one repetition has no spread', () => {
    const d = derivedFigures({ relay_drain: 9_000 }, { raw_consume: [30_000] });
    assert.equal(d.relay_vs_raw_publish_same_shape, null);
    assert.equal(d.e2e_latency_1000_p50_over_naive_ms, null);
    assert.equal(d.raw_consume_spread, null);
  });

  test('targets: met at the bound, not met past it, not measured when missing', () => {
    const statuses = evaluateTargets(
      { e2e_vs_naive: 0.75, e2e_vs_raw_publish: 0.59, e2e_latency_1000_p50_over_naive_ms: 5.01 },
      {},
    );
    assert.deepEqual(statuses.e2e_vs_naive, { target: '≥ 0.75', met: true });
    assert.deepEqual(statuses.e2e_vs_raw_publish, { target: '≥ 0.6', met: false });
    assert.deepEqual(statuses.e2e_latency_1000_p50_over_naive_ms, { target: '≤ 5', met: false });
    assert.equal(statuses.consumer_vs_naive_consumer?.met, null);
    assert.equal(statuses.consumer_vs_naive_consumer?.why, 'not measured');
  });
});
