import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Command } from 'commander';
import type { z } from 'zod';
import { createProgram } from '../../src/cli/program.js';
import { optionDefault, type OptionsSpec } from '../../src/runtime/options.js';
import { relayOptions } from '../../src/relay/options.js';
import { cleanupOptions } from '../../src/ops/cleanup.js';
import { compactionOptions } from '../../src/ops/compaction.js';
import { quarantineFilterOptions } from '../../src/ops/dlq.js';
import { listOutboxOptions } from '../../src/ops/status.js';
import { pipelineStatusOptions } from '../../src/ops/pipeline-options.js';
import { gapQueryOptions } from '../../src/inbox/parking.js';
import { reconcileOptions } from '../../src/reconcile/reconcile.js';
import { rebuildOptions } from '../../src/reconcile/rebuild.js';
import { convergenceMetricsOptions } from '../../src/metrics/metrics.js';
import { serveMetricsOptions } from '../../src/metrics/server.js';
import { partitionedTopologyOptions } from '../../src/transport/topology.js';
import { dashboardOptions } from '../../src/dashboard/options.js';

// Every flag that mirrors a library option: [command path, flag, spec, option key].
const MIRRORED: [string, string, OptionsSpec<z.ZodType>, string][] = [
  ['relay', '--exchange', relayOptions, 'exchange'],
  ['relay', '--routing-key', relayOptions, 'routingKey'],
  ['relay', '--batch-size', relayOptions, 'batchSize'],
  ['relay', '--lease-ms', relayOptions, 'leaseMs'],
  ['relay', '--poll-ms', relayOptions, 'pollIntervalMs'],
  ['relay', '--max-attempts', relayOptions, 'maxAttempts'],
  ['cleanup', '--batch-size', cleanupOptions, 'batchSize'],
  ['compact-inbox', '--batch-size', compactionOptions, 'batchSize'],
  ['dlq list', '--older-than', quarantineFilterOptions, 'olderThanMs'],
  ['dlq list', '--limit', quarantineFilterOptions, 'limit'],
  ['gaps', '--older-than', gapQueryOptions, 'olderThanMs'],
  ['gaps', '--limit', gapQueryOptions, 'limit'],
  ['metrics', '--gap-after-ms', convergenceMetricsOptions, 'gapAfterMs'],
  ['metrics', '--host', serveMetricsOptions, 'host'],
  ['dashboard', '--host', dashboardOptions, 'host'],
  ['dashboard', '--interval', dashboardOptions, 'sampleIntervalMs'],
  ['dashboard', '--history', dashboardOptions, 'historyMs'],
  ['dashboard', '--stall-after-ms', dashboardOptions, 'stallAfterMs'],
  ['outbox list', '--limit', listOutboxOptions, 'limit'],
  ['reconcile', '--page-size', reconcileOptions, 'pageSize'],
  ['reconcile', '--sample', reconcileOptions, 'sampleSize'],
  ['rebuild', '--page-size', rebuildOptions, 'pageSize'],
  ['status', '--window-ms', pipelineStatusOptions, 'windowMs'],
  ['status', '--sample-ms', pipelineStatusOptions, 'sampleMs'],
  ['status', '--stall-after-ms', pipelineStatusOptions, 'stallAfterMs'],
  ['status', '--source-lookback-ms', pipelineStatusOptions, 'sourceLookbackMs'],
  ['topology', '--exchange', partitionedTopologyOptions, 'exchange'],
  ['topology', '--binding', partitionedTopologyOptions, 'bindings'],
  ['topology', '--queue-type', partitionedTopologyOptions, 'queueType'],
  ['topology', '--delivery-limit', partitionedTopologyOptions, 'deliveryLimit'],
];

function commandAt(program: Command, path: string): Command {
  let current = program;
  for (const name of path.split(' ')) {
    const next = current.commands.find((c) => c.name() === name);
    assert.ok(next, `command ${path} is registered`);
    current = next;
  }
  return current;
}

test('every CLI flag that mirrors a library option defaults to the value its schema declares', () => {
  const program = createProgram();
  for (const [path, flag, spec, key] of MIRRORED) {
    const option = commandAt(program, path).options.find((o) => o.long === flag);
    assert.ok(option, `${path} has ${flag}`);
    const declared = optionDefault(spec.schema, key);
    assert.notEqual(declared, undefined, `${spec.component} declares a default for ${key}`);
    assert.deepEqual(option.defaultValue, declared, `${path} ${flag} defaults to ${spec.component}.${key}`);
  }
});

test('a URL the environment does not give falls back to the local default and says so', async () => {
  const { amqpUrl, databaseUrl, LOCAL_AMQP_URL, LOCAL_DATABASE_URL } = await import('../../src/cli/env.js');
  const said: string[] = [];
  const notice = (line: string) => said.push(line);
  assert.equal(databaseUrl(undefined, {}, notice), LOCAL_DATABASE_URL);
  assert.equal(amqpUrl(undefined, { DATABASE_URL: 'postgres://db/app' }, notice), LOCAL_AMQP_URL);
  assert.deepEqual(said, [
    `converge: DATABASE_URL is not set; using the local development default ${LOCAL_DATABASE_URL}`,
    `converge: AMQP_URL is not set; using the local development default ${LOCAL_AMQP_URL}`,
  ]);
  said.length = 0;
  assert.equal(databaseUrl(undefined, { DATABASE_URL: 'postgres://db/app' }, notice), 'postgres://db/app');
  assert.equal(databaseUrl('postgres://flag/app', {}, notice), 'postgres://flag/app');
  assert.deepEqual(amqpUrl(undefined, { AMQP_URL: 'amqp://a, amqp://b' }, notice), ['amqp://a', 'amqp://b']);
  assert.deepEqual(said, [], 'nothing is said when the flag or the environment names it');
});
