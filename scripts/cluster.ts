/**
 * `npm run cluster -- start|stop|status [--dir DIR] [--size N]`: a RabbitMQ cluster of spare nodes
 * on this machine (kit/rabbit-cluster.ts), beside the shared broker, for trying failover by hand.
 * `start` prints the AMQP URLs (comma-separated, as AMQP_URL and --amqp-url take them) and leaves the
 * nodes running; `stop` stops them and removes DIR. DIR defaults to .cluster/ in the repository.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { RabbitCluster } from '../kit/rabbit-cluster.js';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: { dir: { type: 'string', default: path.resolve('.cluster') }, size: { type: 'string', default: '3' } },
});
const dir = path.resolve(values.dir);
const log = (line: string): void => void process.stderr.write(`[cluster] ${line}\n`);

async function main(action: string | undefined): Promise<void> {
  switch (action) {
    case 'start': {
      if (existsSync(path.join(dir, 'cluster.json'))) throw new Error(`${dir} holds a cluster already: stop it first`);
      const cluster = await RabbitCluster.start({ size: Number(values.size), dir, log });
      process.stdout.write(`${cluster.urls.join(',')}\n`);
      return;
    }
    case 'stop':
      if (!existsSync(path.join(dir, 'cluster.json'))) return log(`no cluster in ${dir}`);
      return RabbitCluster.attach(dir, log).teardown();
    case 'status': {
      if (!existsSync(path.join(dir, 'cluster.json'))) return log(`no cluster in ${dir}`);
      const cluster = RabbitCluster.attach(dir, log);
      const up = new Set(cluster.running());
      for (const node of cluster.nodes)
        process.stdout.write(`${node.name} ${node.url} ${up.has(node) ? 'up' : 'down'}\n`);
      return;
    }
    default:
      throw new Error('usage: npm run cluster -- start|stop|status [--dir DIR] [--size N]');
  }
}

main(positionals[0]).catch((err: unknown) => {
  log(err instanceof Error ? err.message : String(err));
  process.exitCode = 1;
});
