/** The stall diagnosis of vacuum's horizon (see diagnose.ts for the other stages). */
import { round, type Finding, type HorizonFacts, type HorizonHolder } from './facts.js';

/**
 * A long transaction, a forgotten prepared transaction or an inactive replication slot with an xmin
 * keeps vacuum from removing the row versions converge leaves behind at the event rate (claims and
 * marks on the outbox, inbox and version rows): tables and indexes bloat and the relay's claim scans
 * slow down until it ends. An active slot moves on by itself and is not judged; a slot of a server
 * before PostgreSQL 17 does not say how long it has been inactive, so an inactive one is always named.
 */
export function horizonFindings(horizon: HorizonFacts): Finding[] {
  return horizon.holders.filter((holder) => holds(holder, horizon.warnAfterSeconds)).map(finding);
}

function holds(holder: HorizonHolder, warnAfterSeconds: number): boolean {
  if (holder.kind === 'replication-slot')
    return holder.state === 'inactive' && (holder.ageSeconds === null || holder.ageSeconds >= warnAfterSeconds);
  return holder.ageSeconds !== null && holder.ageSeconds >= warnAfterSeconds;
}

function finding(holder: HorizonHolder): Finding {
  const since = holder.ageSeconds === null ? '' : ` for ${round(holder.ageSeconds)} s`;
  const behind = `${holder.transactionsBehind} transaction(s) behind`;
  const base = { kind: 'vacuum-horizon-held' as const, severity: 'warning' as const, stage: 'database' as const };
  const effect =
    'vacuum keeps every dead outbox, inbox and projection row version since, and the relay claims slow down';
  switch (holder.kind) {
    case 'transaction':
      return {
        ...base,
        subject: `pid ${holder.holder}`,
        evidence: `a transaction (${holder.state ?? 'unknown state'}) has held the xmin horizon${since}, ${behind}: ${effect}`,
        lookAt:
          'pg_stat_activity for this pid: a transaction left open by an application (idle in transaction), a long report, a backup; idle_in_transaction_session_timeout ends forgotten ones',
        recovered: 'the transaction ends, and the next autovacuum of the outbox lowers its n_dead_tup',
      };
    case 'prepared-transaction':
      return {
        ...base,
        subject: `prepared ${holder.holder}`,
        evidence: `a prepared transaction has held the xmin horizon${since}, ${behind}: ${effect}`,
        lookAt: 'pg_prepared_xacts: the transaction manager that prepared it; COMMIT PREPARED or ROLLBACK PREPARED it',
        recovered: 'pg_prepared_xacts no longer lists it',
      };
    case 'replication-slot':
      return {
        ...base,
        subject: `slot ${holder.holder}`,
        evidence: `inactive replication slot has held the xmin horizon${since}, ${behind}: ${effect}`,
        lookAt:
          'pg_replication_slots: a standby or tool that stopped using its slot (hot_standby_feedback); drop the slot if nothing will come back for it',
        recovered: 'the slot is active again or dropped',
      };
  }
}
