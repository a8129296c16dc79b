/**
 * Pure formatting for the page: the clock and the charts' value axis. No DOM here, so the unit
 * tests run these in node.
 */

const pad = (n: number, width = 2) => String(n).padStart(width, '0');

/**
 * `2026-12-06 03:40:12 UTC`, or `2026-12-06 09:10:12 UTC+05:30` in another zone: the date, the
 * time and the offset, so an operator comparing it with a log or a colleague's screen in another
 * zone cannot misread it. `offsetMinutes` is east of UTC (the negated `Date#getTimezoneOffset`).
 */
export function clockText(ms: number, offsetMinutes: number): string {
  const local = new Date(ms + offsetMinutes * 60_000);
  const date = `${local.getUTCFullYear()}-${pad(local.getUTCMonth() + 1)}-${pad(local.getUTCDate())}`;
  const time = `${pad(local.getUTCHours())}:${pad(local.getUTCMinutes())}:${pad(local.getUTCSeconds())}`;
  if (offsetMinutes === 0) return `${date} ${time} UTC`;
  const sign = offsetMinutes > 0 ? '+' : '-';
  const abs = Math.abs(offsetMinutes);
  return `${date} ${time} UTC${sign}${pad(Math.floor(abs / 60))}:${pad(abs % 60)}`;
}

/** The browser's clock text for `ms`, in the browser's zone at that instant (DST included). */
export function localClockText(ms: number): string {
  // getTimezoneOffset is west of UTC; -0 would print as a positive zero offset, so normalise it.
  return clockText(ms, -new Date(ms).getTimezoneOffset() || 0);
}

/** At most this many intervals on a value axis, so its labels never crowd. */
const MAX_INTERVALS = 5;

/**
 * The value axis's ticks from 0 up to the first tick at or above `max`, a step of 1, 2 or 5 × 10^n.
 * `integer`: the series count things (events, rows), so the step is at least 1 and no tick
 * reads 0.5 events.
 */
export function axisTicks(max: number, integer: boolean): number[] {
  const top = max > 0 && Number.isFinite(max) ? max : 0;
  let step = niceStep(top / MAX_INTERVALS);
  if (integer) step = Math.max(1, step);
  const intervals = Math.max(1, Math.ceil(top / step - 1e-9));
  // toPrecision drops the float noise of i × 0.1 and the like, so labels print 0.3, not 0.30000000000000004.
  return Array.from({ length: intervals + 1 }, (_, i) => Number((i * step).toPrecision(12)));
}

/** The smallest 1, 2 or 5 × 10^n at or above `v` (for `v` ≤ 0, a step of 1). */
function niceStep(v: number): number {
  if (v <= 0) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 5]) if (m * p >= v * (1 - 1e-12)) return m * p;
  return 10 * p;
}
