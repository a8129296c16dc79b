/**
 * The page's script, bundled by esbuild into /assets/app.js (scripts/dashboard/build.ts): polls
 * /api/status at the sampler's pace and hands each section its part of the answer.
 */
import { api, token } from './api.js';
import { $ } from './dom.js';
import { renderCharts } from './charts.js';
import { renderQuarantine, wireQuarantineActions } from './quarantine.js';
import { renderFindings, renderGaps, renderLag, renderPipeline, renderSummary } from './render.js';
import { state } from './state.js';
import type { DashboardData } from './types.js';

function showSamplingError(text: string): void {
  const node = $('sampling-error');
  node.textContent = text;
  node.hidden = !text;
}

function render(data: DashboardData): void {
  state.data = data;
  state.pollMs = Math.max(1000, data.sampleIntervalMs || 2000);
  showSamplingError(data.samplingError ? `sampling failed: ${data.samplingError}` : '');
  $('token-state').textContent = token ? '' : 'read-only: open the URL printed by converge dashboard to act';
  const status = data.status;
  renderSummary(status, data.quarantine);
  renderFindings(status);
  renderPipeline(status);
  renderLag(status);
  renderGaps(status);
  renderQuarantine(data.quarantine);
  renderCharts(data.history, data.sampleIntervalMs);
}

function poll(): void {
  void api<DashboardData>('GET', '/api/status')
    .then((result) => {
      if (result.ok) render(result.json);
      else showSamplingError(`status: HTTP ${result.status}`);
    })
    .catch(() => showSamplingError('dashboard unreachable'))
    .then(() => setTimeout(poll, state.pollMs));
}

function refreshNow(): void {
  void api<DashboardData>('GET', '/api/status').then((result) => {
    if (result.ok) render(result.json);
  });
}

wireQuarantineActions(refreshNow);
poll();
