/**
 * PostgreSQL log sequence numbers (`16/B374D848`) as bigints, so they compare and step
 * without string tricks: pg_lsn is two 32-bit hex halves.
 */
export function parseLsn(lsn: string): bigint {
  const [hi, lo] = lsn.split('/');
  if (hi === undefined || lo === undefined || !/^[0-9A-Fa-f]{1,8}$/.test(hi) || !/^[0-9A-Fa-f]{1,8}$/.test(lo))
    throw new Error(`not an LSN: ${lsn}`);
  return (BigInt(`0x${hi}`) << 32n) | BigInt(`0x${lo}`);
}

export function formatLsn(value: bigint): string {
  const clamped = value < 0n ? 0n : value;
  return `${(clamped >> 32n).toString(16).toUpperCase()}/${(clamped & 0xffffffffn).toString(16).toUpperCase()}`;
}

/** The LSN just before `lsn`: pg-logical-replication reports `acknowledge(x)` as flushed up to x + 1. */
export function lsnBefore(lsn: string): string {
  return formatLsn(parseLsn(lsn) - 1n);
}
