/** Left-aligned columns, two spaces apart; the last column is not padded. */
export function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  return [header, ...rows].map((r) => r.map((cell, i) => cell.padEnd(widths[i]!)).join('  ').trimEnd()).join('\n');
}

export function seconds(value: number | null): string {
  if (value === null) return '-';
  return value >= 100 ? `${value.toFixed(0)} s` : value >= 1 ? `${value.toFixed(1)} s` : `${(value * 1000).toFixed(0)} ms`;
}

export function rate(value: number): string {
  return `${value >= 100 ? value.toFixed(0) : value.toFixed(1)}/s`;
}
