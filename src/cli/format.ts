import type { QuarantineSummary } from '../ops/index.js';
import type { OutboxRow, RetryFailedResult } from '../ops/index.js';
import type { Gap } from '../inbox/index.js';

/** Left-aligned columns, two spaces apart; the last column is not padded. */
export function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  return [header, ...rows]
    .map((r) =>
      r
        .map((cell, i) => cell.padEnd(widths[i]!))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

export function seconds(value: number | null): string {
  if (value === null) return '-';
  return value >= 100
    ? `${value.toFixed(0)} s`
    : value >= 1
      ? `${value.toFixed(1)} s`
      : `${(value * 1000).toFixed(0)} ms`;
}

/** A rate, or `–` when the status was read without a sample (no --sample-ms). */
export function rate(value: number | null): string {
  if (value === null) return '–';
  return `${value >= 100 ? value.toFixed(0) : value.toFixed(1)}/s`;
}

export function outboxTable(rows: OutboxRow[]): string {
  if (rows.length === 0) return 'no rows';
  return table(
    ['event_id', 'aggregate', 'version', 'type', 'attempts', 'broker_retries', 'last_error', 'age'],
    rows.map((r) => [
      r.eventId,
      `${r.aggregateType}/${r.aggregateId}`,
      String(r.aggregateVersion),
      r.eventType,
      String(r.attempts),
      String(r.brokerRetries),
      r.lastError ?? '',
      `${r.ageSeconds.toFixed(0)} s`,
    ]),
  );
}

/** What `outbox retry` did: how many were requeued, and each row the table refused (ids and the rule, never a value). */
export function retryReport(result: RetryFailedResult): string {
  const lines = [`requeued ${result.retried.length} event(s)`];
  if (result.refused.length > 0)
    lines.push(
      `refused ${result.refused.length} event(s): the table's rules refuse them as pending, so they stay failed; fix each row's data, then retry`,
      table(
        ['position', 'event id', 'constraint', 'SQLSTATE'],
        result.refused.map((row) => [row.position, row.eventId, row.constraint ?? '(not named)', row.sqlState]),
      ),
    );
  return lines.join('\n');
}

export function quarantineTable(rows: QuarantineSummary[]): string {
  if (rows.length === 0) return 'nothing quarantined';
  return table(
    ['id', 'consumer', 'event_id', 'reason', 'age', 'resolution', 'replay_outcome', 'detail'],
    rows.map((r) => [
      r.id,
      r.consumer,
      r.eventId ?? '',
      r.reason,
      `${r.ageSeconds.toFixed(0)} s`,
      r.resolution ?? '',
      replayOutcomeCell(r),
      r.detail.length > 60 ? `${r.detail.slice(0, 57)}...` : r.detail,
    ]),
  );
}

/** A failed replay points at the row it landed in, which is the one to look at next. */
function replayOutcomeCell(row: QuarantineSummary): string {
  if (row.replayOutcome === null) return row.resolution === 'replayed' ? '(pending)' : '';
  return row.replayQuarantineId === null ? row.replayOutcome : `${row.replayOutcome} -> ${row.replayQuarantineId}`;
}

export function gapTable(gaps: Gap[]): string {
  if (gaps.length === 0) return 'no gaps';
  const header = ['consumer', 'projection', 'aggregate', 'current', 'missing', 'parked', 'oldest'];
  const rows = gaps.map((g) => [
    g.consumer,
    g.projection,
    `${g.aggregateType}/${g.aggregateId}`,
    String(g.currentVersion),
    String(g.missingVersion),
    parkedCell(g.parkedVersions),
    `${(g.ageMs / 1000).toFixed(1)} s`,
  ]);
  return table(header, rows);
}

/** The first five parked versions, then the count. */
function parkedCell(versions: number[]): string {
  if (versions.length <= 5) return versions.join(',');
  return `${versions.slice(0, 5).join(',')},… (${versions.length})`;
}
