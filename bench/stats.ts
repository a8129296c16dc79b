/** Median of the repetitions; an empty input yields NaN so a missing figure shows up as missing, never as zero. */
export function median(values: number[]): number {
  const finite = values.filter(Number.isFinite).sort((a, b) => a - b);
  if (finite.length === 0) return Number.NaN;
  const mid = finite.length >> 1;
  return finite.length % 2 === 1 ? finite[mid]! : (finite[mid - 1]! + finite[mid]!) / 2;
}

/** Nearest-rank percentile (p99 of 1,000 samples is the 990th smallest). */
export function percentile(values: number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[rank]!;
}

export function rate(count: number, ms: number): number {
  return ms > 0 ? (count * 1000) / ms : Number.NaN;
}

export interface LatencySummary {
  p50: number;
  p99: number;
  max: number;
  samples: number;
}

export function summarizeLatency(samples: number[]): LatencySummary {
  return {
    p50: percentile(samples, 50),
    p99: percentile(samples, 99),
    max: samples.length ? samples.reduce((m, v) => Math.max(m, v), -Infinity) : Number.NaN,
    samples: samples.length,
  };
}

/** Compact human formatting: 12,345 / 123.4 / 1.23. */
export function formatNumber(value: number | null | undefined): string {
  if (value === null || value === undefined || !Number.isFinite(value)) return '–';
  const abs = Math.abs(value);
  if (abs >= 1000) return Math.round(value).toLocaleString('en-US');
  if (abs >= 100) return value.toFixed(0);
  if (abs >= 10) return value.toFixed(1);
  return value.toFixed(2);
}
