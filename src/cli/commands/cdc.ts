import type { Command } from 'commander';
import { createCdcSlot, DEFAULT_CDC_SLOT, dropCdcSlot, showCdcSlot } from '../../relay/index.js';
import { withPool, type CommandContext } from '../context.js';

interface SlotCliOptions {
  slot: string;
  publication: string;
  json?: boolean;
  failover?: boolean;
}

/** `cdc slot create|drop|show`: the replication slot and publication the CDC relay reads through. */
export function registerCdc(program: Command, context: CommandContext): void {
  const cdc = program.command('cdc').description("the CDC relay's logical replication slot");
  const slot = cdc.command('slot').description('create, drop or show the slot and its publication');
  const names = (command: Command) =>
    command
      .option('--slot <name>', 'replication slot name', DEFAULT_CDC_SLOT)
      .option('--publication <name>', 'publication name', DEFAULT_CDC_SLOT);

  names(
    slot
      .command('create')
      .description(
        "create the publication of the outbox's inserts and the pgoutput slot (needs wal_level=logical); events are streamed from now on",
      ),
  )
    .option('--failover', 'create the slot with failover = true (PostgreSQL 17+): standbys that sync slots keep it')
    .action(async (options: SlotCliOptions) => {
      const { databaseUrl, schema } = context.globals();
      const created = await withPool({ databaseUrl, schema }, (pool) =>
        createCdcSlot(pool, {
          schema,
          slot: options.slot,
          publication: options.publication,
          failover: options.failover === true,
        }),
      );
      console.log(
        `publication ${options.publication} ${created.publication ? 'created' : 'exists'}, slot ${options.slot} ${created.slot ? 'created' : 'exists'}`,
      );
    });

  names(
    slot
      .command('drop')
      .description('drop the slot (frees the WAL it retains) and the publication; stop the CDC relay first'),
  ).action(async (options: SlotCliOptions) => {
    const { databaseUrl } = context.globals();
    await withPool({ databaseUrl }, (pool) =>
      dropCdcSlot(pool, { slot: options.slot, publication: options.publication }),
    );
    console.log(`slot ${options.slot} and publication ${options.publication} dropped`);
  });

  names(slot.command('show').description('the slot: active relay pid, confirmed LSN, retained WAL bytes'))
    .option('--json', 'print JSON')
    .action(async (options: SlotCliOptions) => {
      const { databaseUrl } = context.globals();
      const info = await withPool({ databaseUrl }, (pool) => showCdcSlot(pool, options.slot));
      if (!info) {
        console.error(`no replication slot named ${options.slot}`);
        process.exitCode = 1;
        return;
      }
      if (options.json) {
        console.log(JSON.stringify(info, null, 2));
        return;
      }
      console.log(
        [
          `slot                 ${info.slot} (${info.plugin ?? '?'})`,
          `active pid           ${info.activePid ?? '-'}`,
          `confirmed lsn        ${info.confirmedFlushLsn ?? '-'}`,
          `restart lsn          ${info.restartLsn ?? '-'}`,
          `retained wal bytes   ${info.retainedWalBytes}`,
          `wal status           ${info.walStatus ?? '-'}`,
        ].join('\n'),
      );
    });
}
