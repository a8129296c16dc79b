/**
 * The Executor seam on the consumer side: every callback that gets converge's transaction
 * (handlers, batch handlers, gap repair, reconcile repair, rebuild) accepts one written against
 * `Executor` alone, and the ORM views take that transaction as it is.
 */
import type { DataSource } from 'typeorm';
import type { Knex } from 'knex';
import type { EntityManager } from '@mikro-orm/postgresql';
import type {
  BatchHandler,
  EventHandler,
  Executor,
  GapRepairOptions,
  RebuildOptions,
  ReconcileOptions,
  SourceSnapshot,
} from 'converge-events';
import { kyselyFromExecutor } from 'converge-events/kysely';
import { knexFromExecutor } from 'converge-events/knex';
import { drizzleFromExecutor } from 'converge-events/drizzle';
import { typeOrmFromExecutor } from 'converge-events/typeorm';
import { mikroOrmFromExecutor } from 'converge-events/mikro-orm';

declare const knex: Knex;
declare const dataSource: DataSource;
declare const em: EntityManager;
declare const sendToExecutor: (tx: Executor) => Promise<void>;

export const handler: EventHandler = async (_event, { tx }: { tx: Executor }) => {
  await sendToExecutor(tx);
};
export const batch: BatchHandler = async (_events, { tx }: { tx: Executor }) => sendToExecutor(tx);
export const gapApply: GapRepairOptions<SourceSnapshot>['apply'] = async (tx: Executor) => sendToExecutor(tx);
export const reconcileApply: NonNullable<ReconcileOptions['repair']>['apply'] = async (tx: Executor) =>
  sendToExecutor(tx);
export const reconcileRemove: NonNullable<NonNullable<ReconcileOptions['repair']>['remove']> = async (tx: Executor) =>
  sendToExecutor(tx);
export const rebuildReset: NonNullable<RebuildOptions['reset']> = async (tx: Executor) => sendToExecutor(tx);
export const rebuildApply: NonNullable<RebuildOptions['apply']> = async (tx: Executor) => sendToExecutor(tx);

// The handler's tx goes to every view unchanged.
export const views: EventHandler = async (_event, { tx }) => {
  kyselyFromExecutor<{ t: { id: string } }>(tx);
  knexFromExecutor(tx, knex);
  drizzleFromExecutor(tx);
  typeOrmFromExecutor(tx, dataSource);
  mikroOrmFromExecutor(tx, em);
  await Promise.resolve();
};
