/** converge's Relay in its own process, through the public API only. */
import { Relay, silentLogger, type RelayOptions } from '../../src/index.js';
import { ConfigError } from '../../src/errors.js';
import { reportError, runWorker, type BaseConfig } from './ipc.js';

export interface RelayWorkerConfig extends BaseConfig {
  schema: string;
  exchange: string;
  /** Absent: the relay's default. */
  batchSize?: number;
  /** Options that may or may not exist in this version of RelayOptions (e.g. `concurrency`), plus --relay-options. */
  optional: Record<string, unknown>;
  /** Record when the broker confirmed each event, for the latency breakdown. */
  latency?: boolean;
}

/**
 * `concurrency` is being added to RelayOptions while this benchmark is written; the
 * intersection keeps this file compiling before and after. Whether the running relay knows
 * an option is decided at run time from its resolved options (unknown keys are dropped by
 * its validation, or rejected with a ConfigError naming them, in which case we retry without).
 */
type RelayOptionsMaybe = RelayOptions & Record<string, unknown>;

function createRelay(
  options: RelayOptionsMaybe,
  optional: Record<string, unknown>,
): { relay: Relay; dropped: string[] } {
  const dropped: string[] = [];
  for (;;) {
    try {
      return { relay: new Relay(options), dropped };
    } catch (err) {
      const field = err instanceof ConfigError ? err.field.split('.')[0]! : undefined;
      if (!field || !(field in optional) || !(field in options)) throw err;
      delete options[field];
      dropped.push(field);
    }
  }
}

void runWorker<RelayWorkerConfig>(async (config, progress) => {
  const options: RelayOptionsMaybe = {
    connectionString: config.databaseUrl,
    amqpUrl: config.amqpUrl,
    schema: config.schema,
    exchange: config.exchange,
    ...(config.batchSize === undefined ? {} : { batchSize: config.batchSize }),
    logger: silentLogger,
    ...config.optional,
  };
  // eventId → confirm time (ms); the hook runs after the broker confirmed and before the mark.
  const confirmedAt: [string, number][] = [];
  if (config.latency) {
    options.hooks = {
      afterConfirm: (eventIds) => {
        const now = Date.now();
        for (const eventId of eventIds) confirmedAt.push([eventId, now]);
      },
    };
  }
  const { relay, dropped } = createRelay(options, config.optional);
  const resolved = relay.options as unknown as Record<string, unknown>;
  const effective: Record<string, unknown> = {
    batchSize: relay.options.batchSize,
    pollIntervalMs: relay.options.pollIntervalMs,
  };
  for (const key of Object.keys(config.optional))
    effective[key] = key in resolved && !dropped.includes(key) ? resolved[key] : 'unsupported';
  relay.on('published', (eventIds) => progress.add(eventIds.length));
  relay.on('error', reportError);
  let retried = 0;
  relay.on('retry', () => retried++);
  return {
    info: { options: effective },
    start: () => void relay.start(),
    async stop() {
      await relay.stop();
      return { published: progress.count, retried, confirmedAt };
    },
  };
});
