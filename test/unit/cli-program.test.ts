import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { afterEach, describe, mock, test } from 'node:test';
import type { Command, Option } from 'commander';
import { createProgram, errorLine, run } from '../../src/cli/program.js';
import { gapTable, quarantineTable } from '../../src/cli/format.js';
import { duration, each, nonNegativeInteger, port, positiveInteger, quarantineId } from '../../src/cli/context.js';
import { packageVersion } from '../../src/cli/version.js';
import { relayOptions, resolveRelayOptions } from '../../src/relay/options.js';
import { optionDefault } from '../../src/runtime/options.js';
import { ConfigError, ConvergeError, PermanentError } from '../../src/runtime/errors.js';
import type { Gap } from '../../src/inbox/index.js';
import type { QuarantineSummary } from '../../src/ops/dlq.js';

// The program is built and inspected in-process: no database, no broker, no child process.

/** Every command by its path ('dlq replay'), depth first in registration order. */
function commandsOf(command: Command, prefix = ''): Map<string, Command> {
  const found = new Map<string, Command>();
  for (const sub of command.commands) {
    const path = `${prefix}${sub.name()}`;
    found.set(path, sub);
    for (const [name, nested] of commandsOf(sub, `${path} `)) found.set(name, nested);
  }
  return found;
}

function command(path: string): Command {
  const found = commandsOf(createProgram()).get(path);
  assert.ok(found, `command ${path} is registered`);
  return found;
}

function option(cmd: Command, long: string): Option {
  const found = cmd.options.find((o) => o.long === long);
  assert.ok(found, `${cmd.name()} has ${long}`);
  return found;
}

/** The retention flags cleanup and maintain share, after --outbox-older-than. */
const RETENTION_FLAGS = [
  '--inbox-older-than',
  '--retry-horizon-ms',
  '--quarantine-window-ms',
  '--batch-size',
  '--max-batches',
  '--queue',
  '--amqp-url',
  '--retry-tiers',
  '--broker-margin-ms',
];

/** Long flags per command; `!` marks a mandatory one. */
const EXPECTED: Record<string, string[]> = {
  migrate: ['--print-sql', '--partitioned', '--partition-interval', '--partitions-ahead'],
  grants: ['--relay-role', '--consumer-role', '--producer-role', '--projection-table'],
  relay: [
    '--mode',
    '--slot',
    '--publication',
    '--failover-slot',
    '--amqp-url',
    '--exchange',
    '--routing-key',
    '--batch-size',
    '--claim',
    '--lease-ms',
    '--poll-ms',
    '--max-attempts',
    '--relay-id',
    '--direct-url',
    '--metrics-port',
    '--metrics-host',
    '--max-connections',
  ],
  cdc: [],
  'cdc slot': [],
  'cdc slot create': ['--slot', '--publication', '--failover'],
  'cdc slot drop': ['--slot', '--publication'],
  'cdc slot show': ['--slot', '--publication', '--json'],
  topology: [
    '--queue-prefix!',
    '--partitions!',
    '--amqp-url',
    '--exchange',
    '--binding',
    '--queue-type',
    '--delivery-limit',
    '--retry-tiers',
  ],
  status: [
    '--source',
    '--queue',
    '--amqp-url',
    '--window-ms',
    '--sample-ms',
    '--stall-after-ms',
    '--source-lookback-ms',
    '--cdc-slot',
    '--cdc-wal-warn-bytes',
    '--horizon-warn-after-ms',
    '--lag-budget',
    '--json',
  ],
  gaps: ['--consumer', '--older-than', '--limit', '--json'],
  reconcile: [
    '--projection!',
    '--aggregate-type!',
    '--source-sql!',
    '--source-database-url',
    '--target-sql',
    '--count-sql',
    '--page-size',
    '--after',
    '--max-rate',
    '--sample',
    '--repair',
    '--apply-sql',
    '--lookup-sql',
    '--remove-sql',
    '--json',
  ],
  rebuild: [
    '--projection!',
    '--aggregate-type!',
    '--source-sql!',
    '--apply-sql!',
    '--reset-sql!',
    '--source-database-url',
    '--page-size',
    '--max-rate',
    '--json',
  ],
  metrics: ['--port', '--host', '--gap-after-ms'],
  dashboard: ['--host', '--port', '--token', '--queue', '--amqp-url', '--interval', '--history', '--stall-after-ms'],
  cleanup: ['--outbox-older-than!', ...RETENTION_FLAGS],
  // The same retention flags, the outbox window optional: without it, maintain only creates partitions.
  maintain: ['--outbox-older-than', ...RETENTION_FLAGS],
  'compact-inbox': [
    '--consumer!',
    '--projection!',
    '--older-than!',
    '--retry-horizon-ms!',
    '--quarantine-window-ms!',
    '--batch-size',
    '--max-batches',
    '--json',
    '--queue',
    '--amqp-url',
    '--retry-tiers',
    '--broker-margin-ms',
  ],
  outbox: [],
  'outbox list': ['--failed', '--pending', '--limit', '--json'],
  'outbox retry': ['--event-id', '--json'],
  'retry-failed': ['--event-id', '--json'],
  dlq: [],
  'dlq list': ['--consumer', '--reason', '--event-type', '--older-than', '--all', '--limit', '--json'],
  'dlq show': ['--body', '--show-sensitive'],
  'dlq replay': ['--queue', '--amqp-url', '--note'],
  'dlq discard': ['--reason!'],
  compat: [
    '--event-type',
    '--schema-version',
    '--rollback',
    '--accepts',
    '--consumer',
    '--live-within',
    '--sample',
    '--json',
  ],
};

describe('converge program', () => {
  test('building the program registers every command and touches nothing else', () => {
    const signals = [process.listenerCount('SIGTERM'), process.listenerCount('SIGINT')];
    const program = createProgram();
    assert.equal(program.name(), 'converge');
    assert.deepEqual(
      program.options.map((o) => o.long),
      ['--version', '--database-url', '--schema', '--pool-mode'],
    );
    assert.deepEqual([...commandsOf(program).keys()].sort(), Object.keys(EXPECTED).sort());
    assert.deepEqual([process.listenerCount('SIGTERM'), process.listenerCount('SIGINT')], signals);
    assert.notEqual(createProgram(), program, 'each call builds a fresh program');
  });

  for (const [path, flags] of Object.entries(EXPECTED)) {
    test(`${path} takes ${flags.length === 0 ? 'no flags of its own' : flags.join(' ')}`, () => {
      const cmd = command(path);
      assert.deepEqual(
        cmd.options.map((o) => `${o.long}${o.mandatory ? '!' : ''}`),
        flags,
      );
    });
  }

  test('commands with positional ids declare them', () => {
    assert.deepEqual(
      command('dlq show').registeredArguments.map((a) => [a.name(), a.required, a.variadic]),
      [['id', true, false]],
    );
    for (const path of ['dlq replay', 'dlq discard']) {
      assert.deepEqual(
        command(path).registeredArguments.map((a) => [a.name(), a.required, a.variadic]),
        [['ids', true, true]],
      );
    }
  });

  test('retry-failed is outbox retry under its older top-level name: same flags, same help', () => {
    const alias = command('retry-failed');
    const original = command('outbox retry');
    assert.deepEqual(
      alias.options.map((o) => [o.flags, o.description, o.defaultValue as unknown]),
      original.options.map((o) => [o.flags, o.description, o.defaultValue as unknown]),
    );
    assert.match(alias.description(), /same as outbox retry/);
    assert.match(createProgram().helpInformation(), /retry-failed \[options\]\s+same as outbox retry/);
  });

  test('the relay flags default to the relay library defaults', () => {
    const library = resolveRelayOptions({
      connectionString: 'postgres://nobody@127.0.0.1:1/none',
      amqpUrl: 'amqp://x',
    });
    const relay = command('relay');
    const defaults = Object.fromEntries(relay.options.map((o) => [o.attributeName(), o.defaultValue as unknown]));
    assert.deepEqual(
      {
        exchange: defaults.exchange,
        routingKey: defaults.routingKey,
        batchSize: defaults.batchSize,
        leaseMs: defaults.leaseMs,
        pollIntervalMs: defaults.pollMs,
        maxAttempts: defaults.maxAttempts,
      },
      {
        exchange: library.exchange,
        // Resolved into a function; the flag holds the schema's template text.
        routingKey: optionDefault(relayOptions.schema, 'routingKey'),
        batchSize: library.batchSize,
        leaseMs: library.leaseMs,
        pollIntervalMs: library.pollIntervalMs,
        maxAttempts: library.maxAttempts,
      },
    );
    assert.equal(command('topology').options.find((o) => o.long === '--exchange')?.defaultValue, library.exchange);
  });

  test('relay --help shows the library defaults and never a connection string from the environment', () => {
    const saved = { AMQP_URL: process.env.AMQP_URL, DATABASE_URL: process.env.DATABASE_URL };
    process.env.AMQP_URL = 'amqp://u:help-secret@broker:5672';
    process.env.DATABASE_URL = 'postgres://u:help-secret@db/prod';
    try {
      const library = resolveRelayOptions({ connectionString: 'postgres://x@127.0.0.1:1/x', amqpUrl: 'amqp://x' });
      const help = command('relay').helpInformation();
      assert.match(help, /^Usage: converge relay \[options\]/);
      // commander wraps help at the terminal width, so words are matched across any whitespace.
      const words = help.replace(/\s+/g, ' ');
      assert.ok(words.includes(`--batch-size <n> rows claimed per cycle (default: ${library.batchSize})`), help);
      assert.ok(words.includes(`--poll-ms <n> idle poll interval in ms (default: ${library.pollIntervalMs})`), help);
      assert.ok(
        words.includes(
          `--max-attempts <n> attempts before an event is marked failed (default: ${library.maxAttempts})`,
        ),
        help,
      );
      assert.ok(words.includes('(env: CONVERGE_METRICS_PORT)'), help);
      assert.ok(
        words.includes(
          "--amqp-url <url> RabbitMQ URL, or a cluster's node URLs separated by commas (default: env AMQP_URL, else amqp://guest:guest@127.0.0.1:5672, said on stderr)",
        ),
        help,
      );
      const top = createProgram().helpInformation();
      assert.ok(
        top
          .replace(/\s+/g, ' ')
          .includes('--database-url <url> PostgreSQL connection string (default: env DATABASE_URL'),
        top,
      );
      assert.doesNotMatch(help + top, /help-secret/);
    } finally {
      for (const [key, value] of Object.entries(saved)) {
        if (value === undefined) delete process.env[key];
        else process.env[key] = value;
      }
    }
  });

  test('dlq --help lists its four subcommands', () => {
    const help = command('dlq').helpInformation();
    for (const sub of [
      'list [options]',
      'show [options] <id>',
      'replay [options] <ids...>',
      'discard [options] <ids...>',
    ]) {
      assert.ok(help.includes(sub), `dlq help lists ${sub}`);
    }
  });

  test('integer flags reject a non-integer before any command runs', () => {
    const batchSize = option(command('relay'), '--batch-size');
    assert.equal(batchSize.parseArg?.('250', undefined), 250);
    assert.throws(() => batchSize.parseArg?.('2.5', undefined), /must be a positive integer/);
  });
});

describe('error line', () => {
  test("converge's own errors are printed in full, with their code", () => {
    assert.equal(
      errorLine(new ConfigError('apply-sql', '--repair needs --apply-sql to write the read model')),
      'converge: CONVERGE_INVALID_CONFIG: invalid option "apply-sql": --repair needs --apply-sql to write the read model',
    );
    assert.equal(
      errorLine(new ConvergeError('CONVERGE_QUARANTINE_NOT_FOUND', 'no quarantined message 7')),
      'converge: CONVERGE_QUARANTINE_NOT_FOUND: no quarantined message 7',
    );
  });

  test('any other error is printed by class and code only: its message may quote data', () => {
    const driver = Object.assign(new Error('invalid input syntax for type integer: "4111-1111-SECRET"'), {
      code: '22P02',
    });
    assert.equal(errorLine(driver), 'converge: Error 22P02');
    assert.equal(errorLine(new TypeError('Cannot read properties of SECRET')), 'converge: TypeError');
    assert.equal(errorLine('SECRET'), 'converge: string');
  });

  test("a handler's PermanentError keeps its code but not its message, as in the logs", () => {
    assert.equal(
      errorLine(new PermanentError('card 4111-SECRET declined')),
      'converge: PermanentError CONVERGE_PERMANENT',
    );
  });
});

describe('run', () => {
  afterEach(() => {
    mock.restoreAll();
    process.exitCode = undefined;
  });

  test('a failed command prints one error line without the password and exits 1', async () => {
    const printed: unknown[][] = [];
    mock.method(console, 'error', (...args: unknown[]) => void printed.push(args));
    await run(['node', 'converge', '--database-url', 'postgres://u:run-secret@127.0.0.1:1/test', 'retry-failed']);
    assert.equal(process.exitCode, 1);
    assert.deepEqual(printed, [
      [
        'converge: CONVERGE_DATABASE_UNAVAILABLE: PostgreSQL at 127.0.0.1:1: connection refused, nothing listens there (yet) (ECONNREFUSED)',
      ],
    ]);
  });

  test('outbox retry and retry-failed run the same action', async () => {
    const lines: string[] = [];
    mock.method(console, 'error', (line: string) => void lines.push(line));
    for (const args of [['retry-failed'], ['outbox', 'retry']]) {
      await run(['node', 'converge', '--database-url', 'postgres://u@127.0.0.1:1/test', ...args, '--event-id', 'e-1']);
    }
    assert.equal(lines.length, 2);
    assert.equal(lines[0], lines[1]);
    assert.match(
      lines[0]!,
      /^converge: CONVERGE_DATABASE_UNAVAILABLE: PostgreSQL at 127\.0\.0\.1:1: .*\(ECONNREFUSED\)$/,
    );
  });
});

describe('table formatters', () => {
  test('gapTable shows the first five parked versions and the count', () => {
    const gap: Gap = {
      consumer: 'search',
      projection: 'order_view',
      aggregateType: 'order',
      aggregateId: 'o-1',
      currentVersion: 3,
      missingVersion: 4,
      parkedVersions: [5, 6, 7, 8, 9, 10],
      ageMs: 1_500,
    } as Gap;
    assert.equal(gapTable([]), 'no gaps');
    assert.match(gapTable([gap]), /search\s+order_view\s+order\/o-1\s+3\s+4\s+5,6,7,8,9,… \(6\)\s+1\.5 s$/);
  });

  test('quarantineTable points a failed replay at the row it landed in', () => {
    const row = {
      id: '7',
      consumer: 'search',
      eventId: 'q-1',
      reason: 'handler-failed',
      ageSeconds: 12,
      resolution: 'replayed',
      replayOutcome: 'quarantined',
      replayQuarantineId: '9',
      detail: 'x'.repeat(80),
    } as QuarantineSummary;
    assert.equal(quarantineTable([]), 'nothing quarantined');
    const table = quarantineTable([row, { ...row, id: '8', replayOutcome: null, replayQuarantineId: null }]);
    assert.match(table, /^7\s+search\s+q-1\s+handler-failed\s+12 s\s+replayed\s+quarantined -> 9\s+x{57}\.\.\.$/m);
    assert.match(table, /^8\s+.*replayed\s+\(pending\)/m);
  });
});

describe('input parsers', () => {
  test('duration takes plain milliseconds or a unit, and refuses negatives and garbage', () => {
    assert.equal(duration('1500'), 1500);
    assert.equal(duration('1500ms'), 1500);
    assert.equal(duration('30s'), 30_000);
    assert.equal(duration('5m'), 300_000);
    assert.equal(duration('2h'), 7_200_000);
    assert.equal(duration('7d'), 604_800_000);
    for (const bad of ['-5', '-5s', '1.5s', '5x', '', 's', '1e3'])
      assert.throws(() => duration(bad), /must be a duration/, bad);
  });

  test('counts, ports and quarantine ids', () => {
    assert.equal(positiveInteger('1'), 1);
    for (const bad of ['0', '-1', '2.5', 'ten', '1e3'])
      assert.throws(() => positiveInteger(bad), /positive integer/, bad);
    assert.equal(nonNegativeInteger('0'), 0);
    assert.throws(() => nonNegativeInteger('-1'), /0 or more/);
    assert.equal(port('0'), 0);
    assert.throws(() => port('65536'), /0 to 65535/);
    assert.equal(quarantineId('42'), '42');
    for (const bad of ['abc', '0', '-1', '07', '9223372036854775808'])
      assert.throws(() => quarantineId(bad), /quarantine id/, bad);
    assert.deepEqual(each(quarantineId)('8', ['7']), ['7', '8']);
  });

  test('the version is found from src/cli and from a built dist/cli alike', () => {
    const { version } = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
      version: string;
    };
    assert.equal(packageVersion(), version);
    assert.equal(packageVersion(new URL('../../dist/cli/version.js', import.meta.url).href), version);
    assert.equal(packageVersion(new URL('../../dist/esm/cli/version.js', import.meta.url).href), version);
  });
});

test('every exit code a command uses for a finding (2 and up) is named in a description of its file', () => {
  const dir = new URL('../../src/cli/commands/', import.meta.url);
  for (const file of readdirSync(dir).filter((name) => name.endsWith('.ts'))) {
    const source = readFileSync(new URL(file, dir), 'utf8');
    const codes = new Set(
      [...source.matchAll(/exitCode = (\d)\b|\? (\d) : 0\b/g)].map((m) => Number(m[1] ?? m[2])).filter((c) => c >= 2),
    );
    for (const code of codes) {
      // Inside a string literal on one line: a description, not a comment.
      const described = new RegExp(`['"\`][^'"\`\\n]*exit ${code}\\b`).test(source);
      assert.ok(described, `${file} exits ${code} for a finding; its command's description must say so`);
    }
  }
});
