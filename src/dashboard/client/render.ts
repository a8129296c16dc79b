/** The summary cards, the findings and the pipeline, lag and gap tables. */
import { $, clear, el, rate, seconds } from './dom.js';
import { localClockText } from './format.js';
import { fill, row } from './table.js';
import type { PipelineStatus, QuarantineRow, Throughput } from './types.js';

export function renderSummary(status: PipelineStatus | null, quarantine: QuarantineRow[]): void {
  const badge = $('state');
  if (!status) {
    badge.textContent = 'waiting for the first sample';
    badge.className = 'badge';
    return;
  }
  const worst = status.stalled ? 'stalled' : status.findings.length > 0 ? 'warning' : 'ok';
  badge.textContent = worst === 'ok' ? 'OK' : worst.toUpperCase();
  badge.className = `badge ${worst}`;
  $('checked').textContent =
    `checked ${localClockText(Date.parse(status.checkedAt))} · stall after ${status.stallAfterSeconds} s`;
  setValue('pending', status.outbox.pending, false);
  setValue(
    'oldest',
    seconds(status.outbox.oldestPendingAgeSeconds),
    (status.outbox.oldestPendingAgeSeconds || 0) > status.stallAfterSeconds,
  );
  setValue('failed', status.outbox.failed, status.outbox.failed > 0);
  const open = quarantine.filter((q) => q.resolvedAt === null).length;
  setValue('quarantined', open, open > 0);
  setValue('parked', status.gaps.parked, false);
  setValue('stuck', status.gaps.stuckAggregates, status.gaps.stuckAggregates > 0);
}

function setValue(id: string, value: string | number, bad: boolean): void {
  const node = $(id);
  node.textContent = String(value);
  node.className = bad ? 'value bad' : 'value';
}

export function renderFindings(status: PipelineStatus | null): void {
  const root = $('findings');
  clear(root);
  if (!status) return;
  if (status.findings.length === 0) {
    root.appendChild(el('div', 'No stall found', 'none'));
    return;
  }
  status.findings.forEach((f) => {
    const box = el('div', null, `finding ${f.severity}`);
    box.setAttribute('data-kind', f.kind);
    const title = el('div', null, 'title');
    title.appendChild(el('span', f.severity, 'sev'));
    title.appendChild(document.createTextNode(`${f.stage}: ${f.kind}${f.subject ? ` (${f.subject})` : ''}`));
    box.appendChild(title);
    const dl = el('dl');
    (
      [
        ['evidence', f.evidence],
        ['look at', f.lookAt],
        ['recovered', f.recovered],
      ] as const
    ).forEach(([term, text]) => {
      dl.appendChild(el('dt', term));
      dl.appendChild(el('dd', text));
    });
    box.appendChild(dl);
    root.appendChild(box);
  });
}

function drain(t: Throughput): string {
  return t.drainSeconds === null ? 'not draining' : seconds(t.drainSeconds);
}

const NUMERIC = [null, 'num', 'num', 'num', 'num'];

export function renderPipeline(status: PipelineStatus | null): void {
  if (!status) return fill('pipeline', [], 'no sample yet', 5);
  const { outbox } = status;
  const rows = [
    row(
      [
        'outbox → broker',
        outbox.pending,
        rate(outbox.throughput.arrivalPerSecond),
        rate(outbox.throughput.completionPerSecond),
        drain(outbox.throughput),
      ],
      NUMERIC,
    ),
  ];
  status.queues.forEach((q) => {
    rows.push(
      row(
        q.depth === null
          ? [`queue ${q.queue} (missing)`, '–', '–', '–', '–']
          : [
              `queue ${q.queue}${q.consumer === q.queue ? '' : ` → ${q.consumer}`}`,
              q.depth,
              rate(q.throughput.arrivalPerSecond),
              rate(q.throughput.completionPerSecond),
              drain(q.throughput),
            ],
        NUMERIC,
      ),
    );
  });
  fill('pipeline', rows, '', 5);
}

export function renderLag(status: PipelineStatus | null): void {
  const rows = status
    ? status.lag.map((l) =>
        row([l.consumer, l.events, seconds(l.p50Seconds), seconds(l.p99Seconds), seconds(l.maxSeconds)], NUMERIC),
      )
    : [];
  fill('lag', rows, status ? `no event recorded in the last ${status.windowSeconds} s` : 'no sample yet', 5);
}

export function renderGaps(status: PipelineStatus | null): void {
  const rows = status
    ? status.gaps.sample.map((g) =>
        row(
          [g.consumer, `${g.aggregateType}/${g.aggregateId}`, g.currentVersion, g.parkedVersions.join(', ')],
          [null, null, 'num', null],
        ),
      )
    : [];
  const empty = status
    ? `${status.gaps.parked} parked event(s), no aggregate waiting past the stall threshold`
    : 'no sample yet';
  fill('gaps', rows, empty, 4);
}
