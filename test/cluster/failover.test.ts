/**
 * Failover on a real 3-node RabbitMQ cluster (test/support/cluster-env.ts): a relay and a consumer
 * given every node's URL keep delivering every event exactly once while the node they use is stopped
 * and then killed, and while the quorum queue's leader node stops. Partitioned consumers and a
 * restarted node: partitions.test.ts (two files, so each stays within the runner's per-file
 * timeout).
 */
import assert from 'node:assert/strict';
import { describe, test, waitFor } from '../support/rig.js';
import {
  ConnectionLog,
  TIMEOUT,
  assertExactlyOnce,
  appliedCount,
  clusterEnv,
  consumerOn,
  declare,
  declareQuorumQueue,
  nodes,
  progresses,
  relayOn,
  restoreNodes,
  useCluster,
  SLOW,
} from '../support/cluster-env.js';

useCluster();

describe('RabbitMQ cluster: failover between nodes', () => {
  test(
    "stopping the quorum queue's leader node: consumption continues after the leader election",
    TIMEOUT,
    async () => {
      const c = nodes();
      await restoreNodes();
      const env = await clusterEnv();
      await declare((ch) => declareQuorumQueue(ch, env.exchange, env.queue));
      const leader = await waitFor(() => c.queueLeader(env.queue), 'the queue to have a leader');
      // Relay and consumer sit on followers: their connections survive, only the queue's leader moves.
      const followers = c.urls.filter((url) => url !== leader.url);
      const consumerLog = new ConnectionLog();
      const relay = relayOn(env, followers);
      const consumer = consumerOn(env, followers, consumerLog);
      try {
        await consumer.ready();
        await env.append(30);
        await waitFor(async () => (await appliedCount(env)) === 30, 'the events before the leader stops', SLOW);

        await c.stopNode(leader, 'graceful');
        const successor = await waitFor(
          async () => {
            const now = await c.queueLeader(env.queue).catch(() => undefined);
            return now && now !== leader ? now : undefined;
          },
          'a new leader elected',
          SLOW,
        );
        assert.notEqual(successor, leader);
        await env.append(30);
        await assertExactlyOnce(env);
        assert.equal(consumerLog.connections, 1, 'the consumer kept its connection: only the leader moved');
      } finally {
        await relay.stop();
        await consumer.stop();
        await env.close();
      }
    },
  );

  test(
    'relay and consumer keep delivering exactly once while their node is stopped, then killed',
    TIMEOUT,
    async () => {
      const c = nodes();
      await restoreNodes();
      const env = await clusterEnv();
      await declare((ch) => declareQuorumQueue(ch, env.exchange, env.queue));
      const relayLog = new ConnectionLog();
      const consumerLog = new ConnectionLog();
      const relay = relayOn(env, c.urls, relayLog);
      const consumer = consumerOn(env, c.urls, consumerLog);
      const stopProducing = env.produce(10);
      try {
        await consumer.ready();
        await progresses(env, 20, 'before any fault');
        const first = consumerLog.node();
        assert.equal(first, c.nodes[0], 'the first URL is tried first');
        assert.equal(relayLog.node(), c.nodes[0]);

        await c.stopNode(first!, 'graceful');
        await waitFor(() => consumerLog.node() !== first && consumerLog.node(), 'the consumer on another node', SLOW);
        await waitFor(() => relayLog.node() !== first && relayLog.node(), 'the relay on another node', SLOW);
        await progresses(env, 20, 'after a graceful stop of their node');
        await c.startNode(first!);

        const second = consumerLog.node()!;
        const connectionsBefore = consumerLog.connections;
        await c.stopNode(second, 'kill');
        await waitFor(
          () => consumerLog.connections > connectionsBefore && consumerLog.node() !== second,
          'the consumer reconnected to a surviving node',
          SLOW,
        );
        await progresses(env, 20, 'after kill -9 of their node');
        await stopProducing();
        await assertExactlyOnce(env);
      } finally {
        await stopProducing();
        await relay.stop();
        await consumer.stop();
        await env.close();
      }
    },
  );
});
