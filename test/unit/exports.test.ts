/**
 * The public surface, pinned: the runtime names of every entry point, exactly. Adding or removing
 * one makes this test fail, so it is a decision written down here, not an accident.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** package.json subpath -> the source of its entry (dist/<same path>.js once built) -> its runtime names. */
const ENTRY_POINTS: Record<string, { source: string; names: string[] }> = {
  '.': {
    source: 'src/index.ts',
    names: [
      'CdcRelay',
      'Consumer',
      'Converge',
      'RabbitMqTransport',
      'Relay',
      'Tenants',
      'appendManyToOutbox',
      'appendToOutbox',
      'applyIncrement',
      'applyIncrements',
      'applySnapshot',
      'createCdcSlot',
      'createCompatGuard',
      'createConverge',
      'createInProcessTransport',
      'declarePartitionedTopology',
      'defineEvents',
      'dropCdcSlot',
      'grantsSql',
      'idempotencyKey',
      'migrate',
      'migrationSql',
      'performEffect',
      'readEffect',
      'readFresh',
      'readFreshness',
      'readGaps',
      'readProjectionState',
      'rebuildProjection',
      'reconcile',
      'repairFromSnapshot',
      'repairGaps',
      'retryFailedEffect',
      'showCdcSlot',
      'silentLogger',
      'snapshotPages',
      'sourceSnapshot',
      'startCdcRelay',
      'startConsumer',
      'startPartitionedConsumers',
      'startRelay',
      'startTenants',
      'updateExactlyOne',
      'usePreparedStatements',
      'waitForVersion',
      'withTransaction',
      'withoutPreparedStatements',
    ],
  },
  './ops': {
    source: 'src/ops/index.ts',
    names: [
      'DEFAULT_BROKER_MARGIN_MS',
      'boundInboxRetention',
      'checkCompat',
      'cleanup',
      'cleanupOptions',
      'compactInbox',
      'compactionOptions',
      'compatOptions',
      'countedEntries',
      'createPartitionsAhead',
      'createPartitionsAheadOptions',
      'diagnose',
      'discardQuarantined',
      'displayQuarantined',
      'findUnreadable',
      'judgeCompat',
      'listOutbox',
      'listOutboxOptions',
      'listQuarantine',
      'listRegistry',
      'pipelineStatusOptions',
      'quarantineFilterOptions',
      'readPipelineStatus',
      'readStatus',
      'replayQuarantined',
      'retryFailedEvents',
      'scheduleCleanup',
      'showQuarantined',
      'unreadableOptions',
    ],
  },
  './metrics': {
    source: 'src/metrics/index.ts',
    names: [
      'convergenceMetricsOptions',
      'instrumentConsumer',
      'instrumentRelay',
      'registerConvergenceMetrics',
      'serveConsumerMetrics',
      'serveMetrics',
      'serveMetricsOptions',
      'serveRelayMetrics',
      'serveTenantMetrics',
    ],
  },
  './dashboard': {
    source: 'src/dashboard/index.ts',
    names: ['dashboardOptions', 'startDashboard'],
  },
  './errors': {
    source: 'src/errors.ts',
    names: [
      'AdapterError',
      'BodyTooLargeError',
      'BrokerPluginMissingError',
      'CommitRolledBackError',
      'ConcurrencyConflictError',
      'ConfigError',
      'ConnectionConfigError',
      'ContentConflictError',
      'ConvergeError',
      'EnvelopeValidationError',
      'FreshnessTimeoutError',
      'IncompatibleSchemaVersionError',
      'InvalidIdentifierError',
      'MalformedBodyError',
      'NoRowsWrittenError',
      'PayloadValidationError',
      'PermanentError',
      'PublishError',
      'QuarantineNotFoundError',
      'QuarantineResolvedError',
      'ReadyTimeoutError',
      'SchemaNotMigratedError',
      'SchemaTooNewError',
      'ServiceUnavailableError',
      'StaleVersionError',
      'TransientError',
      'UnsupportedSchemaVersionError',
      'VersionGapError',
      'WalLevelNotLogicalError',
    ],
  },
  './internal': {
    source: 'src/internal/index.ts',
    names: [
      'DEFAULT_ROUTING_KEY',
      'DeliveryProcessor',
      'HEADER',
      'MAX_JSON_DEPTH',
      'REPLAY_OF_HEADER',
      'canonicalJson',
      'decideFailure',
      'encodeMessage',
      'fingerprint',
      'outboxRowToEnvelope',
      'parseEnvelope',
      'routingKeyFromTemplate',
      'upcast',
    ],
  },
  './kysely': { source: 'src/adapters/kysely.ts', names: ['executorFromKysely', 'kyselyFromExecutor'] },
  './knex': { source: 'src/adapters/knex.ts', names: ['executorFromKnex', 'knexFromExecutor'] },
  './drizzle': { source: 'src/adapters/drizzle.ts', names: ['drizzleFromExecutor', 'executorFromDrizzle'] },
  './typeorm': { source: 'src/adapters/typeorm.ts', names: ['executorFromTypeOrm', 'typeOrmFromExecutor'] },
  './mikro-orm': { source: 'src/adapters/mikro-orm.ts', names: ['executorFromMikroOrm', 'mikroOrmFromExecutor'] },
};

/** The page that documents each runtime name of the package root (at most 50 of them). */
const ROOT_DOCS: Record<string, string> = {
  createConverge: 'docs/front-door.md',
  Converge: 'docs/front-door.md',
  defineEvents: 'docs/typed-events.md',
  withTransaction: 'docs/outbox.md',
  usePreparedStatements: 'docs/outbox.md',
  withoutPreparedStatements: 'docs/outbox.md',
  migrate: 'docs/operations.md',
  migrationSql: 'docs/outbox.md',
  grantsSql: 'docs/security.md',
  appendToOutbox: 'docs/outbox.md',
  appendManyToOutbox: 'docs/outbox.md',
  updateExactlyOne: 'docs/outbox.md',
  Relay: 'docs/relay.md',
  startRelay: 'docs/relay.md',
  CdcRelay: 'docs/relay.md',
  startCdcRelay: 'docs/relay.md',
  createCdcSlot: 'docs/relay.md',
  dropCdcSlot: 'docs/relay.md',
  showCdcSlot: 'docs/relay.md',
  Consumer: 'docs/consumer.md',
  startConsumer: 'docs/consumer.md',
  startPartitionedConsumers: 'docs/scaling.md',
  readGaps: 'docs/reconcile.md',
  createCompatGuard: 'docs/consumer.md',
  declarePartitionedTopology: 'docs/scaling.md',
  createInProcessTransport: 'docs/transports.md',
  RabbitMqTransport: 'docs/transports.md',
  idempotencyKey: 'docs/remote-effects.md',
  performEffect: 'docs/remote-effects.md',
  readEffect: 'docs/remote-effects.md',
  retryFailedEffect: 'docs/remote-effects.md',
  applyIncrement: 'docs/projections.md',
  applyIncrements: 'docs/projections.md',
  applySnapshot: 'docs/projections.md',
  readProjectionState: 'docs/projections.md',
  waitForVersion: 'docs/freshness.md',
  readFreshness: 'docs/freshness.md',
  readFresh: 'docs/freshness.md',
  reconcile: 'docs/reconcile.md',
  rebuildProjection: 'docs/reconcile.md',
  repairFromSnapshot: 'docs/reconcile.md',
  repairGaps: 'docs/reconcile.md',
  sourceSnapshot: 'docs/reconcile.md',
  snapshotPages: 'docs/reconcile.md',
  silentLogger: 'docs/observability.md',
  startTenants: 'docs/tenants.md',
  Tenants: 'docs/tenants.md',
};

/** The optional peer dependencies: only their own adapter subpath may need them. */
const ORM_PACKAGES = ['kysely', 'knex', 'drizzle-orm', 'typeorm', '@mikro-orm'];

const sourceUrl = (source: string): string => new URL(`../../${source}`, import.meta.url).href;

/** The npm packages (CommonJS, so they land in require.cache) loaded by importing one entry point. */
async function packagesLoadedBy(source: string): Promise<string[]> {
  const probe = [
    "import { createRequire } from 'node:module';",
    `await import(${JSON.stringify(sourceUrl(source))});`,
    'const names = Object.keys(createRequire(import.meta.url).cache).map((p) => p.split(/node_modules[\\\\/]/)[1]?.split(/[\\\\/]/)[0]);',
    'console.log(JSON.stringify([...new Set(names.filter(Boolean))]));',
  ].join('\n');
  const { stdout } = await promisify(execFile)(
    process.execPath,
    ['--import', 'tsx', '--input-type=module', '-e', probe],
    {
      cwd: ROOT,
    },
  );
  return JSON.parse(stdout) as string[];
}

/** Each entry's loaded packages, probed once and all at once: every probe is a node process of its own. */
const probes = new Map<string, Promise<string[]>>();
function loadedBy(subpath: string): Promise<string[]> {
  const source = ENTRY_POINTS[subpath]!.source;
  if (!probes.has(source)) probes.set(source, packagesLoadedBy(source));
  return probes.get(source)!;
}

describe('public entry points', () => {
  for (const [subpath, { source, names }] of Object.entries(ENTRY_POINTS)) {
    it(`${subpath} exports exactly its pinned runtime names`, async () => {
      const entry = (await import(sourceUrl(source))) as Record<string, unknown>;
      assert.deepEqual(Object.keys(entry).sort(), [...names].sort());
      for (const name of names) assert.notEqual(entry[name], undefined, `${subpath} exports ${name} as undefined`);
    });
  }

  it('the package root exports at most 50 runtime names, each documented on its page', () => {
    const names = ENTRY_POINTS['.']!.names;
    assert.ok(names.length <= 50, `the package root exports ${names.length} runtime names`);
    assert.deepEqual(Object.keys(ROOT_DOCS).sort(), [...names].sort());
    for (const [name, page] of Object.entries(ROOT_DOCS)) {
      const text = readFileSync(new URL(`../../${page}`, import.meta.url), 'utf8');
      assert.match(text, new RegExp(`\\b${name}\\b`), `${page} documents ${name}`);
    }
  });

  it('no name is exported from two entry points', () => {
    const seen = new Map<string, string>();
    for (const [subpath, { names }] of Object.entries(ENTRY_POINTS)) {
      for (const name of names) {
        assert.equal(seen.get(name), undefined, `${name} is exported from both ${seen.get(name)} and ${subpath}`);
        seen.set(name, subpath);
      }
    }
  });

  it('package.json maps every entry point, types and code, into dist/', () => {
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
      exports: Record<string, { types: string; default: string }>;
    };
    assert.deepEqual(Object.keys(pkg.exports).sort(), Object.keys(ENTRY_POINTS).sort());
    for (const [subpath, { source }] of Object.entries(ENTRY_POINTS)) {
      const built = source.replace(/^src\//, './dist/').replace(/\.ts$/, '');
      assert.deepEqual(pkg.exports[subpath], { types: `${built}.d.ts`, default: `${built}.js` });
      assert.ok(existsSync(new URL(`../../${source}`, import.meta.url)), `${source} exists`);
    }
  });

  it('the package root, converge/ops and converge/internal never load prom-client; converge/metrics does', async () => {
    // The positive case shows the probe sees prom-client when it is loaded, so the negatives mean something.
    const subpaths = ['.', './ops', './internal', './metrics', './knex', './typeorm', './mikro-orm'];
    await Promise.all(subpaths.map(loadedBy));
    assert.ok((await loadedBy('./metrics')).includes('prom-client'));
    for (const subpath of ['.', './ops', './internal']) {
      const loaded = await loadedBy(subpath);
      assert.ok(loaded.includes('pg'), `the probe sees the packages ${subpath} loads`);
      assert.ok(!loaded.includes('prom-client'), `${subpath} loads prom-client`);
    }
  });

  it('no entry point but an adapter loads an ORM, and the type-only adapters load none', async () => {
    // kysely and drizzle-orm are ESM (not in require.cache): the adapters that need them at
    // runtime are checked by their integration tests; these run without any ORM installed.
    for (const subpath of ['.', './ops', './internal', './metrics', './knex', './typeorm', './mikro-orm']) {
      const loaded = await loadedBy(subpath);
      const orms = loaded.filter((name) => ORM_PACKAGES.includes(name));
      assert.deepEqual(orms, [], `${subpath} loads ${orms.join(', ')}`);
    }
  });
});
