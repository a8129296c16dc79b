/**
 * The quarantine table and its actions (show payload, replay, discard), sent with the token;
 * without one the buttons stay disabled. After a replay or discard the page asks its owner
 * (main.ts) for a fresh status through the callback given to `wireQuarantineActions`.
 */
import { api, token } from './api.js';
import { $, el, seconds } from './dom.js';
import { state } from './state.js';
import { fill, row } from './table.js';
import type { Action, QuarantineRow, ReplayResult, ShownMessage } from './types.js';

const TITLES: Record<Action, string> = { show: 'Payload of', replay: 'Replay', discard: 'Discard' };

let refreshNow: () => void = () => undefined;

export function renderQuarantine(quarantine: QuarantineRow[]): void {
  const rows = quarantine.map((q) => {
    const open = q.resolvedAt === null;
    const tr = row(
      [q.id, q.consumer, q.eventId || '–', q.reason, q.detail, seconds(q.ageSeconds), q.bodyBytes],
      [null, null, null, null, 'detail', 'num', 'num'],
    );
    tr.setAttribute('data-id', q.id);
    if (!open) tr.className = 'resolved';
    const stateText = open
      ? 'open'
      : `${q.resolution}${q.replayOutcome ? ` → ${q.replayOutcome}` : q.resolution === 'replayed' ? ' → pending' : ''}`;
    const stateCell = el('td', stateText, open ? 'state state-open' : 'state');
    if (q.resolutionNote) stateCell.title = q.resolutionNote;
    tr.appendChild(stateCell);
    const actions = el('td', null, 'actions');
    actions.appendChild(button('Show payload', 'show', q));
    if (open) {
      actions.appendChild(button('Replay', 'replay', q));
      actions.appendChild(button('Discard', 'discard', q));
    }
    tr.appendChild(actions);
    return tr;
  });
  fill('quarantine', rows, 'nothing quarantined', 9);
}

function button(label: string, action: Action, q: QuarantineRow): HTMLButtonElement {
  const b = el('button', label, action === 'discard' ? 'danger' : '');
  b.type = 'button';
  b.setAttribute('data-action', action);
  b.disabled = !token;
  b.addEventListener('click', () => openAction(action, q));
  return b;
}

function defaultQueue(consumer: string): string {
  const queues = (state.data && state.data.queues) || [];
  return queues.find((q) => q.consumer === consumer)?.queue ?? consumer;
}

function openAction(action: Action, q: QuarantineRow): void {
  state.action = { action, id: q.id };
  $('action-panel').hidden = false;
  $('replay-form').hidden = action !== 'replay';
  $('discard-form').hidden = action !== 'discard';
  $('payload').hidden = true;
  $('payload').textContent = '';
  setResult('', '');
  $('action-title').textContent = `${TITLES[action]} #${q.id} (${q.consumer}, ${q.eventId || 'no event id'})`;
  if (action === 'replay') {
    $<HTMLInputElement>('replay-queue').value = defaultQueue(q.consumer);
    $<HTMLInputElement>('replay-note').value = '';
  }
  if (action === 'discard') $<HTMLInputElement>('discard-reason').value = '';
  if (action === 'show') send('show', {});
}

function replayed(json: ReplayResult): string {
  const omitted = json.omittedHeaders || [];
  const properties = json.omittedProperties || [];
  return (
    `replayed to ${json.queue}` +
    (omitted.length ? `; headers omitted (could not be carried): ${omitted.join(', ')}` : '') +
    (properties.length ? `; properties omitted (could not be carried): ${properties.join(', ')}` : '')
  );
}

function setResult(text: string, kind: '' | 'ok' | 'failed'): void {
  const node = $('action-result');
  node.textContent = text;
  node.className = kind;
}

function send(action: Action, body: Record<string, string>): void {
  const current = state.action;
  if (!current || current.action !== action) return;
  setResult('working…', '');
  api<{ error?: string } & ShownMessage & ReplayResult>('POST', `/api/quarantine/${current.id}/${action}`, body)
    .then((result) => {
      if (!result.ok) {
        setResult(`failed (HTTP ${result.status}): ${result.json.error || ''}`, 'failed');
        return;
      }
      if (action === 'show') {
        const message = result.json;
        $('payload').textContent =
          `properties: ${JSON.stringify(message.properties, null, 2)}\n\ndetail: ${message.detail}\n\n` +
          `body (${message.bodyBytes} bytes, ${maskingNote(message)}):\n${prettyBody(message.body)}`;
        $('payload').hidden = false;
        setResult('', '');
        return;
      }
      setResult(action === 'replay' ? replayed(result.json) : 'discarded', 'ok');
      $('replay-form').hidden = true;
      $('discard-form').hidden = true;
      refreshNow();
    })
    .catch(() => setResult('failed: dashboard unreachable', 'failed'));
}

function maskingNote(message: ShownMessage): string {
  const paths = message.sensitivePaths ?? [];
  if (message.masking === 'paths') return paths.length ? `masked: ${paths.join(', ')}` : 'nothing marked sensitive';
  if (message.masking === 'payload') return 'payload masked: the message does not say which fields are sensitive';
  if (message.masking === 'body') return 'masked: not a JSON envelope';
  return 'unmasked';
}

function prettyBody(body: string): string {
  try {
    return JSON.stringify(JSON.parse(body), null, 2);
  } catch {
    return body;
  }
}

/** Hooks the panel's buttons up; `refresh` re-reads the status after an action changed it. */
export function wireQuarantineActions(refresh: () => void): void {
  refreshNow = refresh;
  $('action-close').addEventListener('click', () => {
    state.action = null;
    $('action-panel').hidden = true;
    $('payload').textContent = '';
  });
  $('replay-confirm').addEventListener('click', () => {
    const note = $<HTMLInputElement>('replay-note').value;
    const queue = $<HTMLInputElement>('replay-queue').value;
    send('replay', note ? { queue, note } : { queue });
  });
  $('discard-confirm').addEventListener('click', () => {
    const reason = $<HTMLInputElement>('discard-reason').value;
    if (!reason.trim()) {
      setResult('a discard needs a reason', 'failed');
      return;
    }
    send('discard', { reason });
  });
}
