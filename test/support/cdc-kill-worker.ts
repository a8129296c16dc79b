/**
 * A CDC relay that SIGKILLs its own process right after the broker confirmed events and before
 * they are marked or their LSN acknowledged: the crash window of the CDC relay. Started by
 * test/integration/cdc-relay-crash.test.ts with its settings in CDC_WORKER (JSON), through the CDC
 * relay's public fault-injection hook.
 */
import { startCdcRelay } from '../../src/relay/index.js';

const settings = JSON.parse(process.env.CDC_WORKER ?? '{}') as {
  connectionString: string;
  amqpUrl: string;
  schema: string;
  exchange: string;
  slot: string;
  publication: string;
};

startCdcRelay({
  ...settings,
  markIntervalMs: 200,
  hooks: {
    beforeAcknowledge: (eventIds) => {
      if (eventIds.length === 0) return;
      process.stdout.write(`confirmed ${eventIds.join(',')}\n`);
      process.kill(process.pid, 'SIGKILL');
    },
  },
});
