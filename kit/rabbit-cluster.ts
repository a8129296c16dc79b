/**
 * Spare RabbitMQ nodes on this machine, beside the shared broker on 5672: a 3-node cluster for the
 * cluster tests and `npm run chaos -- --cluster`, or one node a test may put under an alarm. Each node
 * is the installed server started with its own node name, AMQP and distribution ports, config file,
 * enabled-plugins file, data and log directories, and an Erlang cookie of its own (HOME points at the
 * cluster's directory), so nothing it does reaches the shared broker. `teardown()` stops every node
 * and removes the directory.
 *
 * The state (node names, ports, directory) is written to `<dir>/cluster.json`, so another process
 * (`npm run cluster -- stop`) can find and stop a cluster it did not start.
 */
import { execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { freePort } from './ports.js';

const run = promisify(execFile);
const SBIN = '/usr/lib/rabbitmq/bin';

export interface RabbitNode {
  /** Erlang node name, e.g. `converge-ab12-1@localhost`. */
  name: string;
  /** AMQP port on 127.0.0.1. */
  port: number;
  distPort: number;
  url: string;
}

export interface ClusterState {
  id: string;
  dir: string;
  nodes: RabbitNode[];
}

export interface StartOptions {
  /** Number of nodes (default 3); 1 gives a lone spare node. */
  size?: number;
  /** Directory for the cookie, configs, data and logs (default: a new one under the OS temp dir). */
  dir?: string;
  /** Called with a short line per step (the script prints them; tests stay quiet). */
  log?: (line: string) => void;
}

/** The installed server's scripts; the Debian wrappers in /usr/sbin switch to the rabbitmq user, which would not see our HOME. */
function command(name: 'rabbitmq-server' | 'rabbitmqctl' | 'rabbitmq-queues'): string {
  const direct = path.join(SBIN, name);
  return existsSync(direct) ? direct : name;
}

export class RabbitCluster {
  readonly id: string;
  readonly dir: string;
  readonly nodes: RabbitNode[];
  readonly #log: (line: string) => void;

  private constructor(state: ClusterState, log: (line: string) => void = () => undefined) {
    this.id = state.id;
    this.dir = state.dir;
    this.nodes = state.nodes;
    this.#log = log;
  }

  /** Starts the nodes in parallel, joins nodes 2..N to node 1, and waits until all serve AMQP. */
  static async start(options: StartOptions = {}): Promise<RabbitCluster> {
    const size = options.size ?? 3;
    const id = randomBytes(3).toString('hex');
    const dir = options.dir ?? path.join(tmpdir(), `converge-cluster-${id}`);
    mkdirSync(dir, { recursive: true });
    const nodes: RabbitNode[] = [];
    for (let i = 1; i <= size; i++) {
      const port = await freePort();
      nodes.push({
        name: `converge-${id}-${i}@localhost`,
        port,
        distPort: await freePort(),
        url: `amqp://guest:guest@127.0.0.1:${port}`,
      });
    }
    const cluster = new RabbitCluster({ id, dir, nodes }, options.log);
    cluster.#writeFiles();
    try {
      await Promise.all(nodes.map((node) => cluster.startNode(node)));
      for (const node of nodes.slice(1)) await cluster.#join(node, nodes[0]!);
      cluster.#log(`cluster ${id} up: ${nodes.map((n) => n.port).join(', ')}`);
      return cluster;
    } catch (err) {
      await cluster.teardown();
      throw err;
    }
  }

  /** A cluster started by another process, from its `cluster.json`. */
  static attach(dir: string, log?: (line: string) => void): RabbitCluster {
    const state = JSON.parse(readFileSync(path.join(dir, 'cluster.json'), 'utf8')) as ClusterState;
    return new RabbitCluster(state, log);
  }

  /** AMQP URLs of every node, in node order: what a relay or consumer takes as its broker list. */
  get urls(): string[] {
    return this.nodes.map((node) => node.url);
  }

  /** Runs rabbitmqctl (or rabbitmq-queues) against `node` with this cluster's cookie. */
  async ctl(
    node: RabbitNode,
    args: string[],
    options: { tool?: 'rabbitmqctl' | 'rabbitmq-queues'; timeoutMs?: number } = {},
  ) {
    const { stdout } = await run(command(options.tool ?? 'rabbitmqctl'), ['-n', node.name, '-q', ...args], {
      env: this.#env(node),
      cwd: this.dir,
      timeout: options.timeoutMs ?? 60_000,
    });
    return stdout;
  }

  /** Starts a node (first start, or again after stopNode): its data directory keeps its cluster membership. */
  async startNode(node: RabbitNode): Promise<void> {
    const started = Date.now();
    await new Promise<void>((resolve, reject) => {
      const child = spawn(command('rabbitmq-server'), ['-detached'], {
        env: this.#env(node),
        // Erlang writes crash dumps (MnesiaCore.*, erl_crash.dump) into the working directory.
        cwd: this.dir,
        stdio: 'ignore',
      });
      child.once('error', (err: NodeJS.ErrnoException) =>
        reject(
          err.code === 'ENOENT'
            ? new Error(
                'rabbitmq-server not found: a cluster runs spare nodes of a locally installed RabbitMQ server ' +
                  `(${SBIN}, or on PATH); install it (e.g. apt install rabbitmq-server), or run npm run test:int alone`,
              )
            : err,
        ),
      );
      child.once('exit', (code) =>
        code === 0 ? resolve() : reject(new Error(`rabbitmq-server -detached for ${node.name} exited with ${code}`)),
      );
    });
    // `rabbitmqctl wait` fails at once (garbage_in_pid_file) if it reads the file while the
    // detached server is still writing it: wait for a whole pid first.
    await this.#waitForPid(node, 90_000);
    await this.ctl(node, ['wait', this.#pidFile(node), '--timeout', '90'], { timeoutMs: 100_000 });
    await this.ctl(node, ['await_startup'], { timeoutMs: 100_000 });
    this.#log(`${node.name} up in ${Date.now() - started} ms`);
  }

  /** Stops a node: gracefully (`rabbitmqctl stop`), or with SIGKILL to its VM as a crash would. */
  async stopNode(node: RabbitNode, how: 'graceful' | 'kill' = 'graceful'): Promise<void> {
    const pid = this.#pid(node);
    if (how === 'kill') {
      if (pid !== undefined) killQuietly(pid, 'SIGKILL');
    } else {
      await this.ctl(node, ['stop', this.#pidFile(node)], { timeoutMs: 90_000 }).catch(() => {
        if (pid !== undefined) killQuietly(pid, 'SIGKILL');
      });
    }
    if (pid !== undefined) await waitForExit(pid, 30_000);
    rmSync(this.#pidFile(node), { force: true });
    this.#log(`${node.name} stopped (${how})`);
  }

  /** Nodes whose VM is alive. */
  running(): RabbitNode[] {
    return this.nodes.filter((node) => {
      const pid = this.#pid(node);
      return pid !== undefined && alive(pid);
    });
  }

  /** The node that leads a quorum queue now, as a running member reports it. */
  async queueLeader(queue: string): Promise<RabbitNode | undefined> {
    const reporter = this.running()[0];
    if (!reporter) return undefined;
    const out = await this.ctl(reporter, ['list_queues', 'name', 'leader', '--no-table-headers']);
    for (const line of out.split('\n')) {
      const [name, leader] = line.trim().split(/\s+/);
      if (name === queue) return this.nodes.find((node) => node.name === leader);
    }
    return undefined;
  }

  /** Sets a node's memory high watermark (a fraction of RAM); a tiny one raises the memory alarm at once. */
  async setMemoryWatermark(node: RabbitNode, fraction: number): Promise<void> {
    await this.ctl(node, ['set_vm_memory_high_watermark', String(fraction)]);
  }

  /** Stops every node (killing what does not stop) and removes the cluster's directory. */
  async teardown(): Promise<void> {
    await Promise.all(
      this.nodes.map(async (node) => {
        const pid = this.#pid(node);
        if (pid === undefined || !alive(pid)) return;
        await this.ctl(node, ['stop', this.#pidFile(node)], { timeoutMs: 30_000 }).catch(() => undefined);
        if (alive(pid)) killQuietly(pid, 'SIGKILL');
        await waitForExit(pid, 30_000);
      }),
    );
    rmSync(this.dir, { recursive: true, force: true });
    this.#log(`cluster ${this.id} removed`);
  }

  /**
   * Kills every node's VM and removes the directory, synchronously: for a process that is being
   * terminated (a test runner's timeout sends SIGTERM), which has no time left for teardown().
   */
  killNow(): void {
    for (const node of this.nodes) {
      const pid = this.#pid(node);
      if (pid !== undefined) killQuietly(pid, 'SIGKILL');
    }
    rmSync(this.dir, { recursive: true, force: true });
  }

  async #join(node: RabbitNode, seed: RabbitNode): Promise<void> {
    await this.ctl(node, ['stop_app']);
    await this.ctl(node, ['join_cluster', seed.name]);
    await this.ctl(node, ['start_app']);
    await this.ctl(node, ['await_startup'], { timeoutMs: 100_000 });
  }

  #writeFiles(): void {
    const cookie = path.join(this.dir, '.erlang.cookie');
    writeFileSync(cookie, randomBytes(16).toString('hex').toUpperCase(), { mode: 0o600 });
    writeFileSync(path.join(this.dir, 'enabled_plugins'), '[rabbitmq_consistent_hash_exchange].\n');
    // The system's rabbitmq-env.conf names the shared node; an empty one keeps it out.
    writeFileSync(path.join(this.dir, 'rabbitmq-env.conf'), '');
    for (const node of this.nodes) {
      writeFileSync(
        this.#configFile(node),
        [`listeners.tcp.default = 127.0.0.1:${node.port}`, 'log.console = false', 'log.file.level = warning', ''].join(
          '\n',
        ),
      );
    }
    writeFileSync(
      path.join(this.dir, 'cluster.json'),
      JSON.stringify({ id: this.id, dir: this.dir, nodes: this.nodes } satisfies ClusterState, null, 2),
    );
  }

  #short(node: RabbitNode): string {
    return node.name.split('@')[0]!;
  }

  #configFile(node: RabbitNode): string {
    return path.join(this.dir, `${this.#short(node)}.conf`);
  }

  async #waitForPid(node: RabbitNode, timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (this.#pid(node) === undefined) {
      if (Date.now() > deadline)
        throw new Error(`${node.name} wrote no pid to ${this.#pidFile(node)} in ${timeoutMs} ms`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  #pidFile(node: RabbitNode): string {
    return path.join(this.dir, `${this.#short(node)}.pid`);
  }

  #pid(node: RabbitNode): number | undefined {
    try {
      const pid = Number(readFileSync(this.#pidFile(node), 'utf8').trim());
      return Number.isInteger(pid) && pid > 0 ? pid : undefined;
    } catch {
      return undefined;
    }
  }

  #env(node: RabbitNode): NodeJS.ProcessEnv {
    return {
      PATH: process.env.PATH,
      LANG: 'C.UTF-8',
      HOME: this.dir,
      RABBITMQ_NODENAME: node.name,
      RABBITMQ_NODE_IP_ADDRESS: '127.0.0.1',
      RABBITMQ_NODE_PORT: String(node.port),
      RABBITMQ_DIST_PORT: String(node.distPort),
      RABBITMQ_CONFIG_FILE: this.#configFile(node),
      RABBITMQ_CONF_ENV_FILE: path.join(this.dir, 'rabbitmq-env.conf'),
      RABBITMQ_ENABLED_PLUGINS_FILE: path.join(this.dir, 'enabled_plugins'),
      RABBITMQ_MNESIA_BASE: path.join(this.dir, 'mnesia'),
      RABBITMQ_LOG_BASE: path.join(this.dir, 'log'),
      RABBITMQ_PID_FILE: this.#pidFile(node),
      ERL_EPMD_ADDRESS: '127.0.0.1',
      RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS: '-kernel inet_dist_use_interface {127,0,0,1}',
    };
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

function killQuietly(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch {
    // already gone
  }
}

async function waitForExit(pid: number, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (alive(pid)) {
    if (Date.now() > deadline) {
      killQuietly(pid, 'SIGKILL');
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
