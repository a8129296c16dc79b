import { InvalidArgumentError, type Command } from 'commander';
import { grantsSql } from '../../schema/grants.js';
import { migrate, migrationSql } from '../../schema/migrate.js';
import { duration, positiveInteger, type CommandContext } from '../context.js';

const DAY_MS = 86_400_000;

interface MigrateCliOptions {
  printSql?: boolean;
  partitioned?: boolean;
  partitionInterval: number;
  partitionsAhead: number;
}

interface GrantsCliOptions {
  relayRole?: string;
  consumerRole?: string[];
  producerRole?: string;
  projectionTable?: string[];
}

/** `migrate` and `grants`: the schema's tables and the roles' privileges on them. */
export function registerSchema(program: Command, context: CommandContext): void {
  program
    .command('migrate')
    .description('create or upgrade converge tables (idempotent, safe to run concurrently)')
    .option('--print-sql', 'print the SQL instead of running it')
    .option(
      '--partitioned',
      'keep outbox and inbox as range partitions by time (converts an existing schema in place; cannot be undone)',
    )
    .option('--partition-interval <ms>', 'with --partitioned: time range of one partition', duration, DAY_MS)
    .option(
      '--partitions-ahead <n>',
      'with --partitioned: partitions kept ready after the current one',
      positiveInteger,
      3,
    )
    .action(async (options: MigrateCliOptions) => {
      const { databaseUrl, schema } = context.globals();
      if (options.printSql && options.partitioned)
        throw new InvalidArgumentError(
          '--print-sql prints the numbered migrations only: the conversion to partitions reads the catalog as it runs',
        );
      if (options.printSql) {
        process.stdout.write(`${migrationSql(schema)}\n`);
        return;
      }
      const partitioned = options.partitioned
        ? { intervalMs: options.partitionInterval, ahead: options.partitionsAhead }
        : undefined;
      const result = await migrate(databaseUrl, { schema, ...(partitioned ? { partitioned } : {}) });
      console.log(
        result.applied.length > 0
          ? `schema ${schema}: applied migrations ${result.applied.join(', ')}`
          : `schema ${schema}: already at migration ${result.version}`,
      );
      if (result.partitioned?.length) console.log(`schema ${schema}: partitioned ${result.partitioned.join(' and ')}`);
    });

  program
    .command('grants')
    .description(
      'print least-privilege GRANT statements for relay, consumer and producer roles (run them as the schema owner after migrate)',
    )
    .option('--relay-role <role>', 'role the relay connects as')
    .option('--consumer-role <role...>', 'role(s) consumers connect as')
    .option('--producer-role <role>', 'role the application appends to the outbox as')
    .option('--projection-table <schema.table...>', 'read-model tables the consumer roles write')
    .action((options: GrantsCliOptions) => {
      const { schema } = context.globals();
      const sql = grantsSql({
        schema,
        ...(options.relayRole !== undefined ? { relayRole: options.relayRole } : {}),
        ...(options.consumerRole !== undefined ? { consumerRoles: options.consumerRole } : {}),
        ...(options.producerRole !== undefined ? { producerRole: options.producerRole } : {}),
        ...(options.projectionTable !== undefined ? { projectionTables: options.projectionTable } : {}),
      });
      process.stdout.write(`${sql}\n`);
    });
}
