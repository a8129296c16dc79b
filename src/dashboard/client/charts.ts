/**
 * The backlog and lag charts, drawn by hand as SVG from the sampler's history: x is time over
 * the ring buffer, y runs from 0 to the first tick at or above the maximum (format.ts's axisTicks).
 */
import { $, clear, el } from './dom.js';
import { axisTicks } from './format.js';
import type { HistoryPoint } from './types.js';

const SVG_NS = 'http://www.w3.org/2000/svg';
const COLORS = ['#2563eb', '#db2777', '#059669', '#d97706', '#7c3aed', '#0891b2'];
const FAILED_COLOR = '#b91c1c';
/** The viewBox of index.html's charts (width, height) and the plot's margins (left, right, top, bottom). */
const [W, H] = [640, 220];
const [L, R, T, B] = [48, 12, 10, 26];

interface Series {
  legend?: string;
  color: string;
  dashed?: boolean;
  /** The values count things (whole events or rows): the chart's axis then ticks in whole numbers. */
  count: boolean;
  points: { t: number; v: number }[];
}

function svg(tag: string, attrs: Record<string, string | number>, text?: string): SVGElement {
  const node = document.createElementNS(SVG_NS, tag);
  Object.keys(attrs).forEach((key) => {
    node.setAttribute(key, String(attrs[key]));
  });
  if (text !== undefined) node.textContent = text;
  return node;
}

// Exact, not rounded: the ticks are already round, and rounding made 1050 read 1.1k and 0.005 s read 0.
function label(v: number): string {
  return v >= 1000 ? `${Number((v / 1000).toPrecision(12))}k` : String(v);
}

function ago(f: number, spanMs: number): string {
  const s = (spanMs * (1 - f)) / 1000;
  if (f === 1) return 'now';
  return s < 120 ? `-${Math.round(s)} s` : `-${Math.round(s / 6) / 10} min`;
}

function drawChart(id: string, legendId: string, series: Series[], spanMs: number, now: number): void {
  const root = $<SVGSVGElement>(id);
  clear(root);
  const legend = $(legendId);
  clear(legend);
  let max = 0;
  series.forEach((s) => {
    s.points.forEach((p) => {
      if (p.v > max) max = p.v;
    });
  });
  // One axis per chart: whole-number ticks unless some series on it is not a count.
  const ticks = axisTicks(
    max,
    series.every((s) => s.count),
  );
  const top = ticks[ticks.length - 1]!;
  const x = (t: number) => L + ((t - (now - spanMs)) / spanMs) * (W - L - R);
  const y = (v: number) => H - B - (v / top) * (H - T - B);
  ticks.forEach((v) => {
    root.appendChild(svg('line', { x1: L, x2: W - R, y1: y(v), y2: y(v), class: 'grid' }));
    root.appendChild(svg('text', { x: L - 6, y: y(v) + 4, 'text-anchor': 'end', class: 'axis y-tick' }, label(v)));
  });
  [0, 0.5, 1].forEach((f) => {
    const anchor = f === 0 ? 'start' : f === 1 ? 'end' : 'middle';
    root.appendChild(
      svg('text', { x: L + f * (W - L - R), y: H - 8, 'text-anchor': anchor, class: 'axis' }, ago(f, spanMs)),
    );
  });
  let drawn = 0;
  series.forEach((s) => {
    if (s.points.length === 0) return;
    const d = s.points.map((p, j) => `${j === 0 ? 'M' : 'L'}${x(p.t).toFixed(1)} ${y(p.v).toFixed(1)}`).join(' ');
    root.appendChild(svg('path', { d, stroke: s.color, class: s.dashed ? 'series dashed' : 'series' }));
    // The newest value as a dot, so a series of one sample shows too.
    const last = s.points[s.points.length - 1]!;
    root.appendChild(
      svg('circle', {
        cx: x(last.t).toFixed(1),
        cy: y(last.v).toFixed(1),
        r: s.dashed ? 2 : 3,
        fill: s.color,
        class: 'dot',
      }),
    );
    drawn++;
    if (s.legend) {
      const item = el('span', s.legend);
      const swatch = svg('svg', { width: 14, height: 4, class: 'swatch' });
      swatch.appendChild(svg('rect', { width: 14, height: 4, fill: s.color }));
      item.insertBefore(swatch, item.firstChild);
      legend.appendChild(item);
    }
  });
  if (drawn === 0)
    root.appendChild(svg('text', { x: W / 2, y: H / 2, 'text-anchor': 'middle', class: 'empty' }, 'no data yet'));
}

export function renderCharts(history: HistoryPoint[], sampleIntervalMs: number): void {
  const first = history[0];
  const newest = history[history.length - 1];
  // The axis spans the ring's samples, and at least 30 intervals so the first samples start at the right.
  const spanMs = Math.max(30 * (sampleIntervalMs || 2000), first && newest ? newest.at - first.at : 0);
  const now = newest ? newest.at : Date.now();
  drawChart(
    'chart-backlog',
    'legend-backlog',
    [
      // Pending and failed are row counts.
      { legend: 'pending', color: COLORS[0]!, count: true, points: history.map((h) => ({ t: h.at, v: h.pending })) },
      { legend: 'failed', color: FAILED_COLOR, count: true, points: history.map((h) => ({ t: h.at, v: h.failed })) },
    ],
    spanMs,
    now,
  );
  const consumers: string[] = [];
  history.forEach((h) => {
    Object.keys(h.lag).forEach((c) => {
      if (!consumers.includes(c)) consumers.push(c);
    });
  });
  const series: Series[] = [];
  consumers.forEach((c, i) => {
    const color = COLORS[i % COLORS.length]!;
    const points = (key: 'p50Seconds' | 'p99Seconds') =>
      history.flatMap((h) => {
        const lag = h.lag[c];
        return lag ? [{ t: h.at, v: lag[key] }] : [];
      });
    // Lag is a duration in seconds, often under one: its axis keeps decimal ticks (0.2 s, 0.5 s).
    series.push({ legend: c, color, count: false, points: points('p99Seconds') });
    series.push({ color, dashed: true, count: false, points: points('p50Seconds') });
  });
  drawChart('chart-lag', 'legend-lag', series, spanMs, now);
}
