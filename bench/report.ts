/**
 * The table and the JSON line. Targets come from the performance issues (the latest, issue 15,
 * replaced absolute rates and latencies with ratios measured in the same run); whether one is
 * met is computed from the measured value every time, and a value that was not measured is
 * reported as such, never as met.
 */
import { formatNumber, median } from './stats.js';

export type Results = Record<string, number | null>;

interface Target {
  op: '>=' | '<=';
  value: number;
  /** Why it may be missing, e.g. the flag that measures it. */
  needs?: string;
  /** Extra condition for the target to apply (the RSS target is about a 1M backlog). */
  applies?: (results: Results) => string | null;
}

interface Row {
  key: string;
  unit: string;
  target?: Target;
  note?: string;
}

interface Section {
  title: string;
  rows: Row[];
}

/** A measurement's CPU milliseconds per event, in all and per party (bench/cpu.ts). */
function cpuRows(key: string, note?: string): Row[] {
  return [
    { key: `${key}_cpu_ms`, unit: 'ms', ...(note ? { note } : {}) },
    ...['node', 'postgres', 'rabbitmq'].map((party) => ({ key: `${key}_cpu_ms_${party}`, unit: 'ms' })),
  ];
}

function statementRow(key: string, note?: string): Row {
  return { key: `${key}_statements_per_1000_events`, unit: 'stmts', ...(note ? { note } : {}) };
}

function walRow(key: string, note?: string): Row {
  return { key: `${key}_wal_bytes_per_event`, unit: 'B', ...(note ? { note } : {}) };
}

export const SECTIONS: Section[] = [
  {
    title: 'raw baselines (no converge code)',
    rows: [
      { key: 'raw_publish', unit: 'msg/s', note: 'confirm window 1000, persistent, mandatory' },
      {
        key: 'raw_publish_same_shape',
        unit: 'msg/s',
        note: "the same loop sending converge's exact message (body, properties, headers)",
      },
      { key: 'raw_consume', unit: 'msg/s', note: 'prefetch 1000, ack-multiple per 100' },
      { key: 'raw_consume_spread', unit: '×', note: '(max − min) / median over the repetitions' },
      {
        key: 'naive_consumer_apply',
        unit: 'events/s',
        note: "consumer_apply's queue and upsert, without inbox or version check",
      },
      { key: 'raw_pg_single_commit', unit: 'tx/s', note: 'informative' },
      { key: 'raw_pg_batch_insert', unit: 'rows/s', note: 'informative' },
      {
        key: 'raw_pg_round_trip_us',
        unit: 'µs',
        note: 'one prepared statement, one at a time: the most pipelining saves per statement',
      },
      { key: 'naive_pipeline', unit: 'events/s', note: 'no inbox, no ordering, no leases' },
      { key: 'naive_latency_1000_p50_ms', unit: 'ms', note: 'reference' },
      { key: 'naive_latency_1000_p99_ms', unit: 'ms', note: 'reference' },
    ],
  },
  {
    title: 'converge',
    rows: [
      { key: 'outbox_single', unit: 'events/s', note: 'one event per transaction' },
      { key: 'outbox_batch', unit: 'events/s', note: '500 events per transaction' },
      { key: 'relay_drain', unit: 'events/s' },
      { key: 'relay_peak_rss_mb', unit: 'MB', note: 'during relay_drain (maxRSS of the relay process)' },
      { key: 'relay_baseline_rss_mb', unit: 'MB', note: 'same process before start: node + tsx loader + imports' },
      { key: 'relay_drain_2relays', unit: 'events/s' },
      {
        key: 'relay_drain_exclusive',
        unit: 'events/s',
        note: "one relay with claim: 'exclusive' (claims by reading under the relay lock)",
      },
      {
        key: 'cdc_relay_drain',
        unit: 'events/s',
        note: 'CDC relay (logical replication slot) on CDC_DATABASE_URL, until every row is marked',
      },
      { key: 'consumer_apply', unit: 'events/s' },
      { key: 'consumer_peak_rss_mb', unit: 'MB' },
      { key: 'e2e_sustained', unit: 'events/s' },
      { key: 'cdc_e2e_sustained', unit: 'events/s', note: 'the same pipeline with the CDC relay' },
      { key: 'e2e_latency_1000_p50_ms', unit: 'ms' },
      { key: 'e2e_latency_1000_p99_ms', unit: 'ms' },
      { key: 'e2e_latency_1000_max_ms', unit: 'ms' },
      {
        key: 'e2e_latency_1000_applied_rate',
        unit: 'events/s',
        note: 'first insert → last commit; < 1000 = fell behind',
      },
      {
        key: 'e2e_latency_1000_to_confirm_p50_ms',
        unit: 'ms',
        note: 'stage: occurredAt → broker confirm (producer commit, NOTIFY, claim, publish)',
      },
      { key: 'e2e_latency_1000_to_confirm_p99_ms', unit: 'ms' },
      {
        key: 'e2e_latency_1000_to_handler_p50_ms',
        unit: 'ms',
        note: 'stage: confirm → handler start (delivery, BEGIN, inbox insert; < 0 = before confirm)',
      },
      { key: 'e2e_latency_1000_to_handler_p99_ms', unit: 'ms' },
      { key: 'e2e_latency_1000_to_commit_p50_ms', unit: 'ms', note: 'stage: handler start → commit and ack' },
      { key: 'e2e_latency_1000_to_commit_p99_ms', unit: 'ms' },
      { key: 'cdc_latency_1000_p50_ms', unit: 'ms', note: 'the same pipeline with the CDC relay' },
      { key: 'cdc_latency_1000_p99_ms', unit: 'ms' },
      { key: 'cdc_latency_1000_applied_rate', unit: 'events/s', note: 'first insert → last commit' },
      { key: 'e2e_latency_half_rate', unit: 'events/s', note: 'offered: half of e2e_sustained' },
      { key: 'e2e_latency_half_p50_ms', unit: 'ms' },
      { key: 'e2e_latency_half_p99_ms', unit: 'ms' },
      { key: 'e2e_latency_half_max_ms', unit: 'ms' },
      { key: 'e2e_latency_half_applied_rate', unit: 'events/s', note: 'first insert → last commit' },
    ],
  },
  {
    title: 'ratios',
    rows: [
      { key: 'e2e_vs_naive', unit: '×', target: { op: '>=', value: 0.75 } },
      { key: 'e2e_vs_raw_publish', unit: '×', target: { op: '>=', value: 0.6 } },
      { key: 'relay_vs_raw_publish_same_shape', unit: '×', target: { op: '>=', value: 0.9 } },
      {
        key: 'relay_exclusive_vs_raw_publish_same_shape',
        unit: '×',
        note: "claim: 'exclusive'",
        target: { op: '>=', value: 0.9 },
      },
      { key: 'cdc_relay_vs_raw_publish_same_shape', unit: '×', target: { op: '>=', value: 0.9 } },
      { key: 'consumer_vs_naive_consumer', unit: '×', target: { op: '>=', value: 0.7 } },
      {
        key: 'e2e_latency_1000_p50_over_naive_ms',
        unit: 'ms',
        note: 'e2e p50 − naive p50 at 1,000/s',
        target: { op: '<=', value: 5 },
      },
      {
        key: 'e2e_latency_1000_p99_vs_naive',
        unit: '×',
        note: 'e2e p99 / naive p99 at 1,000/s',
        target: { op: '<=', value: 1.5 },
      },
      {
        key: 'cdc_latency_1000_p50_over_naive_ms',
        unit: 'ms',
        note: 'CDC e2e p50 − naive p50 at 1,000/s',
        target: { op: '<=', value: 5 },
      },
      {
        key: 'cdc_latency_1000_p99_vs_naive',
        unit: '×',
        note: 'CDC e2e p99 / naive p99 at 1,000/s',
        target: { op: '<=', value: 1.5 },
      },
      { key: 'cdc_e2e_vs_naive', unit: '×', note: 'informative: cdc_e2e_sustained / naive_pipeline' },
      { key: 'relay_vs_raw_publish', unit: '×', note: 'informative: raw_publish sends a smaller message' },
      { key: 'consumer_vs_raw_consume', unit: '×', note: 'informative: raw_consume swings between runs' },
    ],
  },
  {
    title: 'CPU per event in the sustained runs (all parties on the same cores)',
    rows: [
      ...cpuRows('naive_pipeline', 'node (bench + workers) + PostgreSQL + RabbitMQ'),
      ...cpuRows('e2e_sustained', 'node (bench + workers) + PostgreSQL + RabbitMQ'),
      {
        key: 'naive_pipeline_cores_busy',
        unit: 'cores',
        note: 'CPU per event × rate: how many cores the run kept busy',
      },
      { key: 'e2e_sustained_cores_busy', unit: 'cores' },
      ...cpuRows('cdc_e2e_sustained', 'the CDC pipeline (its PostgreSQL: CDC_DATABASE_URL)'),
      { key: 'cdc_e2e_sustained_cores_busy', unit: 'cores' },
      {
        key: 'e2e_vs_naive_cpu_bound',
        unit: '×',
        note: 'naive CPU per event / converge CPU per event: e2e_vs_naive when both are CPU-bound',
      },
    ],
  },
  {
    title: 'CPU and statements per event in the drains',
    rows: [
      ...cpuRows('relay_drain', 'workers (and the bench) + PostgreSQL + RabbitMQ, per event drained'),
      statementRow('relay_drain', 'statements (round trips) its workers sent to PostgreSQL'),
      walRow('relay_drain', 'WAL PostgreSQL wrote during the drain'),
      ...['relay_drain_exclusive', 'cdc_relay_drain', 'naive_consumer_apply', 'consumer_apply'].flatMap((key) => [
        ...cpuRows(key),
        statementRow(key),
        walRow(key),
      ]),
      {
        key: 'consumer_vs_naive_consumer_cpu_bound',
        unit: '×',
        note: 'naive consumer CPU per event / consumer CPU per event',
      },
      {
        key: 'relay_round_trip_us_per_event',
        unit: 'µs',
        note: 'statements per event × raw_pg_round_trip_us: the most pipelining could save per event',
      },
      { key: 'consumer_round_trip_us_per_event', unit: 'µs' },
    ],
  },
  {
    title: 'history (5M published outbox rows, 5M inbox rows)',
    rows: [
      { key: 'relay_drain_history', unit: 'events/s' },
      { key: 'consumer_apply_history', unit: 'events/s' },
      { key: 'relay_history_ratio', unit: '×', target: { op: '>=', value: 0.8, needs: '--history' } },
      { key: 'consumer_history_ratio', unit: '×', target: { op: '>=', value: 0.8, needs: '--history' } },
    ],
  },
  {
    title: 'vacuum pressure (a transaction holds the xmin horizon for the whole run)',
    rows: [
      { key: 'relay_drain_unpinned', unit: 'events/s' },
      { key: 'relay_drain_pinned', unit: 'events/s' },
      { key: 'relay_pinned_ratio', unit: '×', target: { op: '>=', value: 0.8, needs: '--vacuum' } },
      { key: 'consumer_apply_unpinned', unit: 'events/s' },
      { key: 'consumer_apply_pinned', unit: 'events/s' },
      { key: 'consumer_pinned_ratio', unit: '×', target: { op: '>=', value: 0.8, needs: '--vacuum' } },
      ...(['outbox', 'inbox', 'projection_state'] as const).flatMap((table) => [
        { key: `${table}_dead_tuples_unpinned`, unit: 'rows', note: `n_dead_tup of ${table} after the run` },
        { key: `${table}_dead_tuples_pinned`, unit: 'rows' },
      ]),
    ],
  },
  {
    title: 'relay memory on a large backlog',
    rows: [
      { key: 'relay_backlog_rows', unit: 'rows' },
      { key: 'relay_backlog_drain', unit: 'events/s' },
      {
        key: 'relay_backlog_baseline_rss_mb',
        unit: 'MB',
        note: 'same compiled process before it starts: node + imports + connections',
      },
      {
        key: 'relay_backlog_peak_rss_mb',
        unit: 'MB',
        note: 'compiled JavaScript on plain node (no tsx), default relay options',
        target: {
          op: '<=',
          value: 150,
          needs: '--rss',
          applies: (r) => ((r.relay_backlog_rows ?? 0) < 1_000_000 ? 'target is for a 1M backlog' : null),
        },
      },
    ],
  },
];

export interface TargetStatus {
  target: string;
  met: boolean | null;
  why?: string;
}

export function evaluateTargets(results: Results, errors: Record<string, string>): Record<string, TargetStatus> {
  const statuses: Record<string, TargetStatus> = {};
  for (const row of SECTIONS.flatMap((s) => s.rows)) {
    const target = row.target;
    if (!target) continue;
    const text = `${target.op === '>=' ? '≥' : '≤'} ${target.value}`;
    const value = results[row.key];
    if (value === null || value === undefined || !Number.isFinite(value)) {
      const why = errors[row.key]
        ? 'failed'
        : target.needs
          ? `not measured (run with ${target.needs})`
          : 'not measured';
      statuses[row.key] = { target: text, met: null, why };
      continue;
    }
    const notApplicable = target.applies?.(results);
    if (notApplicable) {
      statuses[row.key] = { target: text, met: null, why: notApplicable };
      continue;
    }
    statuses[row.key] = { target: text, met: target.op === '>=' ? value >= target.value : value <= target.value };
  }
  return statuses;
}

export function renderTable(
  results: Results,
  targets: Record<string, TargetStatus>,
  errors: Record<string, string>,
): string {
  const lines: string[] = [];
  const width = Math.max(...SECTIONS.flatMap((s) => s.rows.map((r) => r.key.length)));
  for (const section of SECTIONS) {
    if (
      section.rows.every((row) => results[row.key] === null || results[row.key] === undefined) &&
      !section.rows.some((row) => targets[row.key])
    )
      continue;
    lines.push('', `  ${section.title}`);
    for (const row of section.rows) {
      const value = results[row.key];
      const status = targets[row.key];
      let right = row.note ?? '';
      if (status)
        right = `target ${status.target}: ${status.met === null ? status.why : status.met ? 'met' : 'NOT MET'}`;
      if (errors[row.key]) right = `FAILED (see below)`;
      lines.push(
        `  ${row.key.padEnd(width)}  ${formatNumber(value).padStart(10)}  ${row.unit.padEnd(8)}  ${right}`.trimEnd(),
      );
    }
  }
  const all = Object.values(targets);
  lines.push(
    '',
    `  targets: ${all.filter((t) => t.met === true).length} met, ${all.filter((t) => t.met === false).length} not met, ${all.filter((t) => t.met === null).length} not measured`,
  );
  const failures = Object.entries(errors);
  if (failures.length > 0) {
    lines.push('', '  failures:');
    for (const [key, message] of failures) lines.push(`    ${key}: ${message}`);
  }
  return lines.join('\n');
}

/** Rounded so the JSON line stays readable; null (not undefined) for anything not measured. */
export function jsonLine(
  results: Results,
  targets: Record<string, TargetStatus>,
  errors: Record<string, string>,
  meta: Record<string, unknown>,
): string {
  const rounded: Record<string, number | null> = {};
  for (const row of SECTIONS.flatMap((s) => s.rows)) {
    const value = results[row.key];
    rounded[row.key] =
      value === null || value === undefined || !Number.isFinite(value) ? null : Number(value.toPrecision(4));
  }
  return JSON.stringify({ ...rounded, targets, errors, meta });
}

/** Figures computed from the measured ones: ratios within the run, and the spread of a noisy baseline. */
export function derivedFigures(r: Results, samples: Record<string, number[]>): Results {
  const ratio = (a: string, b: string) => {
    const [x, y] = [r[a], r[b]];
    return x != null && y != null && y > 0 ? x / y : null;
  };
  const difference = (a: string, b: string) => {
    const [x, y] = [r[a], r[b]];
    return x != null && y != null ? x - y : null;
  };
  const product = (a: string, b: string, scale: number) => {
    const [x, y] = [r[a], r[b]];
    return x != null && y != null ? x * y * scale : null;
  };
  return {
    relay_vs_raw_publish: ratio('relay_drain', 'raw_publish'),
    relay_vs_raw_publish_same_shape: ratio('relay_drain', 'raw_publish_same_shape'),
    relay_exclusive_vs_raw_publish_same_shape: ratio('relay_drain_exclusive', 'raw_publish_same_shape'),
    cdc_relay_vs_raw_publish_same_shape: ratio('cdc_relay_drain', 'raw_publish_same_shape'),
    cdc_latency_1000_p50_over_naive_ms: difference('cdc_latency_1000_p50_ms', 'naive_latency_1000_p50_ms'),
    cdc_latency_1000_p99_vs_naive: ratio('cdc_latency_1000_p99_ms', 'naive_latency_1000_p99_ms'),
    consumer_vs_raw_consume: ratio('consumer_apply', 'raw_consume'),
    consumer_vs_naive_consumer: ratio('consumer_apply', 'naive_consumer_apply'),
    e2e_vs_naive: ratio('e2e_sustained', 'naive_pipeline'),
    e2e_vs_raw_publish: ratio('e2e_sustained', 'raw_publish'),
    e2e_latency_1000_p50_over_naive_ms: difference('e2e_latency_1000_p50_ms', 'naive_latency_1000_p50_ms'),
    e2e_latency_1000_p99_vs_naive: ratio('e2e_latency_1000_p99_ms', 'naive_latency_1000_p99_ms'),
    naive_pipeline_cores_busy: product('naive_pipeline_cpu_ms', 'naive_pipeline', 1 / 1000),
    e2e_sustained_cores_busy: product('e2e_sustained_cpu_ms', 'e2e_sustained', 1 / 1000),
    cdc_e2e_sustained_cores_busy: product('cdc_e2e_sustained_cpu_ms', 'cdc_e2e_sustained', 1 / 1000),
    cdc_e2e_vs_naive: ratio('cdc_e2e_sustained', 'naive_pipeline'),
    consumer_vs_naive_consumer_cpu_bound: ratio('naive_consumer_apply_cpu_ms', 'consumer_apply_cpu_ms'),
    relay_round_trip_us_per_event: product('relay_drain_statements_per_1000_events', 'raw_pg_round_trip_us', 1 / 1000),
    consumer_round_trip_us_per_event: product(
      'consumer_apply_statements_per_1000_events',
      'raw_pg_round_trip_us',
      1 / 1000,
    ),
    e2e_vs_naive_cpu_bound: ratio('naive_pipeline_cpu_ms', 'e2e_sustained_cpu_ms'),
    relay_history_ratio: ratio('relay_drain_history', 'relay_drain'),
    consumer_history_ratio: ratio('consumer_apply_history', 'consumer_apply'),
    relay_pinned_ratio: ratio('relay_drain_pinned', 'relay_drain_unpinned'),
    consumer_pinned_ratio: ratio('consumer_apply_pinned', 'consumer_apply_unpinned'),
    raw_consume_spread: spread(samples.raw_consume ?? []),
  };
}

/** (max − min) / median; null below two repetitions, where there is no spread to report. */
function spread(values: number[]): number | null {
  const finite = values.filter(Number.isFinite);
  if (finite.length < 2) return null;
  return (Math.max(...finite) - Math.min(...finite)) / median(finite);
}
