/**
 * Partitioned consumers on a real 3-node RabbitMQ cluster (test/support/cluster-env.ts): two groups
 * on different nodes keep single-active-consumer order when the active group's node is killed, and
 * the killed node, restarted, rejoins and serves a relay and a consumer given only its URL.
 */
import assert from 'node:assert/strict';
import {
  declarePartitionedTopology,
  silentLogger,
  startPartitionedConsumers,
  type Consumer,
  type EventHandler,
} from '../../src/index.js';
import type { RabbitNode } from '../../kit/rabbit-cluster.js';
import { describe, test } from '../support/rig.js';
import {
  BACKOFF,
  ConnectionLog,
  TIMEOUT,
  assertExactlyOnce,
  clusterEnv,
  clusterName,
  consumerOn,
  declare,
  declareQuorumQueue,
  nodes,
  progresses,
  relayOn,
  restoreNodes,
  useCluster,
} from '../support/cluster-env.js';

useCluster();

describe('RabbitMQ cluster: partitions and a restarted node', () => {
  test('partitioned consumers keep single-active-consumer order across the loss of a node', TIMEOUT, async () => {
    const c = nodes();
    await restoreNodes();
    const env = await clusterEnv();
    const queuePrefix = clusterName('cvcl.parts');
    const partitions = 3;
    const [lost, , keeper] = c.nodes as [RabbitNode, RabbitNode, RabbitNode];
    // Declared through the node that stays up: the classic retry companions live there.
    await declare(async (ch) => {
      await declarePartitionedTopology(ch, { exchange: env.exchange, queuePrefix, partitions, queueType: 'quorum' });
    }, keeper);
    // Handlers of both groups note which aggregates they are inside right now: two at once is a violation.
    const inside = new Map<string, string>();
    const overlaps: string[] = [];
    const watched =
      (label: string): EventHandler =>
      async (event, context) => {
        const other = inside.get(event.aggregateId);
        if (other !== undefined) overlaps.push(`${event.aggregateId}: ${other} and ${label}`);
        inside.set(event.aggregateId, label);
        try {
          await env.handler(label)(event, context);
        } finally {
          if (inside.get(event.aggregateId) === label) inside.delete(event.aggregateId);
        }
      };
    const group = (label: string, urls: string[]) =>
      startPartitionedConsumers({
        amqpUrl: urls,
        queuePrefix,
        partitions,
        consumer: 'cluster',
        exchange: env.exchange,
        pool: env.db.pool,
        schema: env.schema,
        backoff: BACKOFF,
        reconnectBackoff: BACKOFF,
        logger: silentLogger,
        handlers: { AmountAdded: watched(label) },
      });
    const relay = relayOn(env, [keeper.url]);
    // A subscribes first, so it is active on every partition; B, on other nodes, waits.
    const groupA = group('A', [lost.url, ...c.urls.filter((u) => u !== lost.url)]);
    const groupB: Consumer[] = [];
    const stopProducing = env.produce(10);
    try {
      await Promise.all(groupA.map((consumer) => consumer.ready()));
      groupB.push(...group('B', c.urls.filter((u) => u !== lost.url).reverse()));
      await Promise.all(groupB.map((consumer) => consumer.ready()));
      await progresses(env, 30, 'with group A active');

      await c.stopNode(lost, 'kill');
      await progresses(env, 30, "after A's node was killed");
      await stopProducing();
      await assertExactlyOnce(env);

      assert.deepEqual(overlaps, [], 'no aggregate was inside two consumers at once');
      const { rows } = await env.db.pool.query<{ aggregate_id: string; consumers: string }>(
        `SELECT aggregate_id, string_agg(consumer, '' ORDER BY seq) AS consumers FROM "${env.schema}".applied GROUP BY aggregate_id`,
      );
      for (const row of rows)
        assert.match(row.consumers, /^A+B+$/, `${row.aggregate_id}: A until its node went, then B alone`);
    } finally {
      await stopProducing();
      await relay.stop();
      await Promise.all([...groupA, ...groupB].map((consumer) => consumer.stop()));
      // The queues go with the cluster (the file's own, removed after it): deleting a quorum queue while one of
      // its members is down waited out a timeout, 105 s for these three partitions, most of this file's time.
      await env.close();
    }
  });

  test('a restarted node rejoins the cluster and serves relays and consumers again', TIMEOUT, async () => {
    const c = nodes();
    // The node the previous test killed; if it ran alone, one is killed here.
    const up = new Set(c.running().map((n) => n.name));
    const node = c.nodes.find((n) => !up.has(n.name)) ?? c.nodes[1]!;
    if (up.has(node.name)) await c.stopNode(node, 'kill');
    const env = await clusterEnv();
    try {
      await c.startNode(node);
      await declare((ch) => declareQuorumQueue(ch, env.exchange, env.queue));
      const status = await c.ctl(c.nodes[0]!, ['cluster_status', '--formatter', 'json']);
      const running = (JSON.parse(status) as { running_nodes: string[] }).running_nodes;
      assert.ok(running.includes(node.name), `${node.name} is a running member again`);
      // Only the restarted node's URL: every event must pass through it.
      const consumerLog = new ConnectionLog();
      const relay = relayOn(env, [node.url]);
      const consumer = consumerOn(env, [node.url, c.nodes[0]!.url], consumerLog);
      try {
        await consumer.ready();
        await env.append(30);
        await assertExactlyOnce(env);
        assert.equal(consumerLog.node(), node, 'the consumer is served by the restarted node');
      } finally {
        await relay.stop();
        await consumer.stop();
      }
    } finally {
      await env.close();
    }
  });
});
