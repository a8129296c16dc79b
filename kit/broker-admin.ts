/**
 * Broker administration the AMQP protocol cannot do (list and force-close connections,
 * stop and start the node), in one place. It shells out to `rabbitmqctl`; set
 * RABBITMQCTL to another command (e.g. "docker exec rabbitmq rabbitmqctl") when the broker
 * runs in a container.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

const run = promisify(execFile);

export async function rabbitmqctl(args: string[], timeoutMs = 30_000): Promise<string> {
  const [command, ...prefix] = (process.env.RABBITMQCTL ?? 'rabbitmqctl').split(' ').filter(Boolean);
  try {
    const { stdout } = await run(command!, [...prefix, '-q', ...args], { timeout: timeoutMs });
    return stdout;
  } catch (err) {
    const missing = (err as NodeJS.ErrnoException).code === 'ENOENT';
    if (missing)
      throw new Error(
        `rabbitmqctl is not available (${command}); install RabbitMQ locally or set RABBITMQCTL to a command that runs it`,
      );
    throw err;
  }
}

/** pids of broker connections whose client properties contain `needle` (e.g. a connection_name). */
export async function connectionPids(needle: string): Promise<string[]> {
  const out = await rabbitmqctl(['list_connections', 'pid', 'client_properties'], 20_000);
  return out
    .split('\n')
    .filter((line) => line.includes(needle))
    .map((line) => line.split('\t')[0]!.trim());
}

/** pids of the connections whose client-provided connection_name is exactly `name`. */
export function connectionPidsNamed(name: string): Promise<string[]> {
  return connectionPids(`{"connection_name","${name}"}`);
}

export async function closeConnection(pid: string, reason: string): Promise<void> {
  await rabbitmqctl(['close_connection', pid, reason], 20_000);
}

/** Stops and restarts the broker application (the node keeps running); waits until it serves again. */
export async function restartBrokerApp(): Promise<void> {
  await rabbitmqctl(['stop_app'], 60_000);
  await rabbitmqctl(['start_app'], 60_000);
  await rabbitmqctl(['await_startup'], 60_000);
}
