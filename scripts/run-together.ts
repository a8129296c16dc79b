/**
 * `tsx scripts/run-together.ts test:int test:cluster`: runs npm scripts side by side and fails if
 * any of them fails. The first one's output streams as it comes; each other's is kept and printed
 * whole when it ends, so no two interleave. `npm test` uses it for the integration suite and the
 * cluster suite: the cluster's spare RabbitMQ nodes never touch the shared broker and its tests use
 * schemas of their own, and most of its minutes are spent waiting for nodes and partitions.
 */
import { spawn } from 'node:child_process';

interface Ended {
  script: string;
  code: number;
  output: string;
}

function runScript(script: string, stream: boolean): Promise<Ended> {
  return new Promise((resolve) => {
    const child = spawn('npm', ['run', script], {
      stdio: ['ignore', stream ? 'inherit' : 'pipe', stream ? 'inherit' : 'pipe'],
    });
    const chunks: Buffer[] = [];
    child.stdout?.on('data', (chunk: Buffer) => chunks.push(chunk));
    child.stderr?.on('data', (chunk: Buffer) => chunks.push(chunk));
    child.once('error', (err) =>
      resolve({ script, code: 1, output: `could not start npm run ${script}: ${err.message}\n` }),
    );
    child.once('close', (code, signal) =>
      resolve({ script, code: code ?? (signal ? 1 : 0), output: Buffer.concat(chunks).toString() }),
    );
  });
}

const scripts = process.argv.slice(2);
if (scripts.length === 0) {
  console.error('usage: tsx scripts/run-together.ts <npm script> [<npm script> ...]');
  process.exit(2);
}
const ended = await Promise.all(scripts.map((script, i) => runScript(script, i === 0)));
for (const run of ended.slice(1)) {
  console.log(`\n---- npm run ${run.script} (ran beside npm run ${scripts[0]}): exit ${run.code} ----`);
  process.stdout.write(run.output);
}
const failed = ended.filter((run) => run.code !== 0);
for (const run of failed) console.error(`run-together: npm run ${run.script} failed (exit ${run.code})`);
process.exit(failed.length === 0 ? 0 : 1);
