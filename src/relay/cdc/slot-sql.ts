import type pg from 'pg';
import { poolTarget } from '../../db/pool.js';
import { ConfigError, WalLevelNotLogicalError } from '../../runtime/errors.js';
import { quoteIdentifier, schemaRef } from '../../runtime/identifier.js';

/** A replication slot as pg_replication_slots shows it, with the WAL it keeps on disk. */
export interface SlotInfo {
  slot: string;
  plugin: string | null;
  /** Process id of the walsender using the slot (the active CDC relay), null while none does. */
  activePid: number | null;
  /** Up to where the relay acknowledged: PostgreSQL resends everything after it. */
  confirmedFlushLsn: string | null;
  restartLsn: string | null;
  /** pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn): WAL the server may not recycle because of this slot. */
  retainedWalBytes: number;
  walStatus: string | null;
}

const DUPLICATE_OBJECT = '42710';

/**
 * Creates the publication of the outbox's inserts (nothing else: the relay publishes new rows;
 * its own marks must not come back through the slot) unless it exists. Through the partition root,
 * so a partitioned outbox's rows arrive as the outbox's (a no-op for the plain table).
 */
export async function ensurePublication(pool: pg.Pool, schema: string, publication: string): Promise<boolean> {
  const exists = await pool.query('SELECT 1 FROM pg_publication WHERE pubname = $1', [publication]);
  if ((exists.rowCount ?? 0) > 0) return false;
  try {
    await pool.query(
      `CREATE PUBLICATION ${quoteIdentifier(publication, 'publication')} FOR TABLE ${schemaRef(schema).quoted}.outbox WITH (publish = 'insert', publish_via_partition_root = true)`,
    );
    return true;
  } catch (err) {
    // Another relay created it first.
    if ((err as { code?: string }).code === DUPLICATE_OBJECT) return false;
    throw err;
  }
}

/** Creates the pgoutput slot unless it exists; it starts at the current WAL position (older rows are not replayed). */
export async function ensureSlot(pool: pg.Pool, slot: string, failover = false): Promise<boolean> {
  const exists = await pool.query('SELECT 1 FROM pg_replication_slots WHERE slot_name = $1', [slot]);
  if ((exists.rowCount ?? 0) > 0) return false;
  if (failover) await requireFailoverSlots(pool);
  try {
    // Arguments: name, plugin, temporary, two-phase, failover (the last since PostgreSQL 17).
    await pool.query(
      failover
        ? `SELECT pg_create_logical_replication_slot($1, 'pgoutput', false, false, true)`
        : `SELECT pg_create_logical_replication_slot($1, 'pgoutput')`,
      [slot],
    );
    return true;
  } catch (err) {
    if ((err as { code?: string }).code === DUPLICATE_OBJECT) return false;
    throw err;
  }
}

/**
 * Throws WalLevelNotLogicalError unless the server has wal_level=logical. Checked up front: without
 * it PostgreSQL's own refusal (SQLSTATE 55000) comes only at slot creation or START_REPLICATION,
 * and a relay would retry it forever although only a restart of the server can change it.
 */
export async function requireLogicalWalLevel(pool: pg.Pool): Promise<void> {
  const { rows } = await pool.query<{ wal_level: string }>("SELECT current_setting('wal_level') AS wal_level");
  const walLevel = rows[0]?.wal_level ?? 'unknown';
  if (walLevel !== 'logical') throw new WalLevelNotLogicalError(poolTarget(pool).endpoint, walLevel);
}

/** Failover slots came with PostgreSQL 17; an older server would only say its function signature is unknown. */
async function requireFailoverSlots(pool: pg.Pool): Promise<void> {
  const { rows } = await pool.query<{ version: number }>(
    "SELECT current_setting('server_version_num')::int AS version",
  );
  const version = rows[0]?.version ?? 0;
  if (version < 170_000)
    throw new ConfigError(
      'failoverSlot',
      `failover slots need PostgreSQL 17 or later; this server is ${Math.floor(version / 10_000)}`,
    );
}

/**
 * Creates both; true for each that was created here. Throws WalLevelNotLogicalError on a server
 * without logical decoding. `failover`: the slot is kept on standbys that sync slots (PostgreSQL 17+,
 * ConfigError before); a slot that exists keeps the flag it was created with.
 */
export async function createCdcSlot(
  pool: pg.Pool,
  names: { schema: string; slot: string; publication: string; failover?: boolean },
): Promise<{ publication: boolean; slot: boolean }> {
  await requireLogicalWalLevel(pool);
  const publication = await ensurePublication(pool, names.schema, names.publication);
  const slot = await ensureSlot(pool, names.slot, names.failover ?? false);
  return { publication, slot };
}

/**
 * Drops the slot (freeing the WAL it retains) and the publication; either may be missing. A slot a
 * relay is using cannot be dropped (SQLSTATE 55006): stop the relay first.
 */
export async function dropCdcSlot(pool: pg.Pool, names: { slot: string; publication: string }): Promise<void> {
  await pool.query('SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1', [
    names.slot,
  ]);
  await pool.query(`DROP PUBLICATION IF EXISTS ${quoteIdentifier(names.publication, 'publication')}`);
}

/** The slot's state, or undefined when there is no such slot. */
export async function showCdcSlot(pool: pg.Pool, slot: string): Promise<SlotInfo | undefined> {
  const { rows } = await pool.query<{
    slot_name: string;
    plugin: string | null;
    active_pid: number | null;
    confirmed_flush_lsn: string | null;
    restart_lsn: string | null;
    retained: string | null;
    wal_status: string | null;
  }>(
    `SELECT slot_name, plugin, active_pid, confirmed_flush_lsn::text, restart_lsn::text, wal_status,
            pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::bigint::text AS retained
       FROM pg_replication_slots WHERE slot_name = $1`,
    [slot],
  );
  const row = rows[0];
  if (!row) return undefined;
  return {
    slot: row.slot_name,
    plugin: row.plugin,
    activePid: row.active_pid,
    confirmedFlushLsn: row.confirmed_flush_lsn,
    restartLsn: row.restart_lsn,
    retainedWalBytes: Number(row.retained ?? 0),
    walStatus: row.wal_status,
  };
}
