import type { Command } from 'commander';
import { grantsSql } from '../../schema/grants.js';
import { migrate, migrationSql } from '../../schema/migrate.js';
import type { CommandContext } from '../context.js';

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
    .action(async (options: { printSql?: boolean }) => {
      const { databaseUrl, schema } = context.globals();
      if (options.printSql) {
        process.stdout.write(`${migrationSql(schema)}\n`);
        return;
      }
      const result = await migrate(databaseUrl, { schema });
      console.log(
        result.applied.length > 0
          ? `schema ${schema}: applied migrations ${result.applied.join(', ')}`
          : `schema ${schema}: already at migration ${result.version}`,
      );
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
