export function median(values: number[]): number {
  return percentile(values, 50);
}

/** Nearest-rank percentile; an empty input yields NaN so a missing figure is visible, not zero. */
export function percentile(values: number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[rank]!;
}

export function rate(count: number, ms: number): number {
  return ms > 0 ? (count * 1000) / ms : Number.NaN;
}
