/** converge's CdcRelay in its own process, through the public API only, on the slot bench/cdc.ts created. */
import { CdcRelay, silentLogger } from '../../src/index.js';
import { reportError, runWorker, type BaseConfig } from './ipc.js';

export interface CdcRelayWorkerConfig extends BaseConfig {
  schema: string;
  exchange: string;
  slot: string;
  publication: string;
}

void runWorker<CdcRelayWorkerConfig>(async (config, progress) => {
  const relay = new CdcRelay({
    connectionString: config.databaseUrl,
    amqpUrl: config.amqpUrl,
    schema: config.schema,
    exchange: config.exchange,
    slot: config.slot,
    publication: config.publication,
    createSlot: false,
    logger: silentLogger,
  });
  relay.on('published', (eventIds) => progress.add(eventIds.length));
  relay.on('error', reportError);
  return {
    info: { options: { maxInFlight: relay.options.maxInFlight, markIntervalMs: relay.options.markIntervalMs } },
    // Streaming before the producer starts, as the consumer worker is connected before it starts.
    start: () => relay.start().ready(),
    async stop() {
      await relay.stop();
      return { published: progress.count };
    },
  };
});
