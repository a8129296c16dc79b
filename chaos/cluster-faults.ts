/**
 * `npm run chaos -- --cluster`: the run's broker is a 3-node RabbitMQ cluster of spare nodes
 * (kit/rabbit-cluster.ts) instead of the shared broker, every worker gets every node's URL, and
 * three more faults take nodes away while producers write: the queue leader's node, any one
 * node (gracefully or with SIGKILL), each restarted a few seconds later. Only one node is ever
 * down: the quorum queue needs two of three, so a node fault first waits for the last one's node
 * to be back. The restart itself (tens of seconds on a busy machine) runs while other faults go on.
 */
import amqp from 'amqplib';
import { RabbitCluster, type RabbitNode } from '../kit/rabbit-cluster.js';
import { between, type FaultKind } from './schedule.js';

export const CLUSTER_FAULT_KINDS = ['stop-leader-node', 'stop-minority-node', 'kill-node'] as const;
export type ClusterFaultKind = (typeof CLUSTER_FAULT_KINDS)[number];

/** Faults that need the shared single broker: restarting its app would not touch the cluster. */
const SINGLE_BROKER_ONLY: readonly FaultKind[] = ['restart-broker'];

export function isClusterFault(kind: FaultKind): kind is ClusterFaultKind {
  return (CLUSTER_FAULT_KINDS as readonly string[]).includes(kind);
}

/** The kinds a run draws from: node faults only on a cluster, the shared broker's restart only without one. */
export function faultKindsFor(clustered: boolean, kinds: readonly FaultKind[]): FaultKind[] {
  return kinds.filter((kind) => (clustered ? !SINGLE_BROKER_ONLY.includes(kind) : !isClusterFault(kind)));
}

/** `urls` rotated by `offset`: workers start on different nodes, so a node loss hits some of them. */
export function rotated(urls: readonly string[], offset: number): string[] {
  const at = offset % urls.length;
  return [...urls.slice(at), ...urls.slice(0, at)];
}

export class ClusterFaults {
  readonly counts: Record<string, number> = {};
  #restarting: Promise<void> | undefined;

  private constructor(
    readonly cluster: RabbitCluster,
    readonly queue: string,
    readonly random: () => number,
    readonly log: (line: string) => void,
  ) {}

  static async start(queue: string, random: () => number, log: (line: string) => void): Promise<ClusterFaults> {
    log('starting a 3-node RabbitMQ cluster');
    const cluster = await RabbitCluster.start({ size: 3, log });
    return new ClusterFaults(cluster, queue, random, log);
  }

  get urls(): string[] {
    return this.cluster.urls;
  }

  /** Node faults wait while a node is still booting: drawn then, they would only stall the schedule. */
  deferred(): readonly FaultKind[] {
    return this.#restarting ? CLUSTER_FAULT_KINDS : [];
  }

  /** A connection to the first node that accepts one, for the injector's own declares and checks. */
  async connect(): Promise<amqp.ChannelModel> {
    let last: unknown;
    for (const node of this.cluster.running()) {
      try {
        const connection = await amqp.connect(node.url);
        connection.on('error', () => undefined);
        return connection;
      } catch (err) {
        last = err;
      }
    }
    throw new Error(`no cluster node accepts a connection: ${(last as Error | undefined)?.message ?? 'none running'}`);
  }

  /** rabbitmqctl against a running node (list_connections and close_connection see the whole cluster). */
  ctl(args: string[]): Promise<string> {
    const node = this.cluster.running()[0];
    if (!node) return Promise.reject(new Error('no cluster node is running'));
    return this.cluster.ctl(node, args);
  }

  async inject(kind: ClusterFaultKind): Promise<void> {
    // A node a failed restart left down comes back first: two down would cost the quorum.
    await this.restoreNodes();
    const victim = kind === 'stop-leader-node' ? await this.#leader() : this.#anyNode();
    const how = kind === 'kill-node' ? 'kill' : this.random() < 0.5 ? 'graceful' : 'kill';
    const downMs = between(this.random, 2_000, 6_000);
    this.log(`${kind}: ${victim.name} (${how}), back in ${downMs} ms`);
    this.counts[`${kind}:${how}`] = (this.counts[`${kind}:${how}`] ?? 0) + 1;
    await this.cluster.stopNode(victim, how);
    await new Promise((resolve) => setTimeout(resolve, downMs));
    this.#restarting = this.cluster
      .startNode(victim)
      .catch((err: unknown) => this.log(`${victim.name} did not start: ${(err as Error).message.split('\n')[0]}`))
      .finally(() => (this.#restarting = undefined));
  }

  /** Starts every node that is not running (after a restart under way); before each node fault and the final check. */
  async restoreNodes(): Promise<void> {
    await this.#restarting;
    const up = new Set(this.cluster.running().map((node) => node.name));
    const down = this.cluster.nodes.filter((node) => !up.has(node.name));
    for (const node of down) {
      this.log(`${node.name} is down; starting it`);
      await this.cluster.startNode(node);
    }
  }

  async teardown(): Promise<void> {
    // A node still booting has no pid file yet: teardown would miss it and leave it running.
    await this.#restarting;
    await this.cluster.teardown();
  }

  async #leader(): Promise<RabbitNode> {
    const leader = await this.cluster.queueLeader(this.queue).catch(() => undefined);
    return leader ?? this.#anyNode();
  }

  #anyNode(): RabbitNode {
    return this.cluster.nodes[between(this.random, 0, this.cluster.nodes.length - 1)]!;
  }
}
