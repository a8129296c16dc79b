/**
 * The set-up of a test that runs the relay or a consumer on the in-process transport: a migrated
 * schema, a fresh transport and an exchange name. Relays and consumers started through it run on
 * those, quiet, through their own pool (DATABASE_URL), the relay polling every 20 ms; when the work
 * ends, whatever happened, they are stopped, the transport closed and the schema dropped.
 */
import {
  createInProcessTransport,
  silentLogger,
  startConsumer,
  startRelay,
  type Consumer,
  type ConsumerOptions,
  type InProcessTransport,
  type Relay,
  type RelayOptions,
} from '../../src/index.js';
import type { UntypedEvents } from '../../src/envelope/events.js';
import { DATABASE_URL, createTestSchema, uniqueName, type TestDatabase } from './rig.js';

export interface InProcessFixture {
  db: TestDatabase;
  transport: InProcessTransport;
  /** `cvt.ip.x`, made unique. */
  exchange: string;
  /** Starts a relay on this transport, exchange and schema; `options` override that. */
  startRelay: (options?: RelayOptions) => Relay;
  /** Starts a consumer on this transport, exchange and schema; `options` name its queue. */
  startConsumer: <M extends object = UntypedEvents>(options: ConsumerOptions<M>) => Consumer<M>;
}

export async function withInProcessFixture(
  prefix: string,
  work: (fixture: InProcessFixture) => Promise<void>,
): Promise<void> {
  const db = await createTestSchema(prefix);
  const transport = createInProcessTransport();
  const exchange = uniqueName('cvt.ip.x');
  const common = { transport, connectionString: DATABASE_URL, schema: db.schema, exchange, logger: silentLogger };
  // Relays first: they stop before the consumers they publish to.
  const started: { stop(): Promise<void> }[] = [];
  try {
    await work({
      db,
      transport,
      exchange,
      startRelay: (options) => {
        const relay = startRelay({ ...common, pollIntervalMs: 20, ...options });
        started.unshift(relay);
        return relay;
      },
      startConsumer: <M extends object>(options: ConsumerOptions<M>) => {
        const consumer = startConsumer<M>({ ...common, ...options });
        started.push(consumer);
        return consumer;
      },
    });
  } finally {
    for (const component of started) await component.stop();
    await transport.close();
    await db.close();
  }
}
