/**
 * Which PostgreSQL and which broker `npm run lab` and `npm run demo` use. Pure: the launcher
 * (scripts/local-env.ts) finds out what is configured and what answers, these decide.
 *
 * Real services win whenever they are configured (DATABASE_URL / AMQP_URL set) or reachable at the
 * default address; a configured one that does not answer is an error, never silently replaced.
 * Only when nothing is configured and nothing answers is the embedded stand-in used.
 */

export interface Probe {
  /** DATABASE_URL / AMQP_URL as set by the user; undefined when unset. */
  configuredUrl?: string;
  /** The address tried when nothing is configured (the local default). */
  probeUrl: string;
  /** Whether the configured address answered (after starting it if local) or the probed default one answered. */
  reachable: boolean;
  /** host:port of the address tried, for messages (never the URL: it may hold a password). */
  where: string;
  /** Why it did not answer, for the message. */
  failure?: string;
}

export type PostgresChoice = { use: 'server'; url: string } | { use: 'embedded' } | { use: 'none'; reason: string };

export type BrokerChoice = { use: 'rabbitmq'; url: string } | { use: 'in-process' } | { use: 'none'; reason: string };

export function choosePostgres(probe: Probe): PostgresChoice {
  if (probe.configuredUrl !== undefined)
    return probe.reachable
      ? { use: 'server', url: probe.configuredUrl }
      : {
          use: 'none',
          reason: `DATABASE_URL is set, and ${probe.failure ?? `PostgreSQL at ${probe.where} is not reachable`}`,
        };
  return probe.reachable ? { use: 'server', url: probe.probeUrl } : { use: 'embedded' };
}

/**
 * `createInProcessTransport()` (src/transport/in-process.ts) exists: programs that accept it (the
 * lab, lab/broker.ts; the demo, scripts/demo/main.ts `transportFor`) build it when
 * CONVERGE_TRANSPORT=in-process. Kept as a flag so chooseBroker's other branch stays tested.
 */
export const IN_PROCESS_TRANSPORT_AVAILABLE = true;

export interface InProcess {
  /** The program can run on the in-process transport (`--in-process`: the lab and the demo can). */
  accepted: boolean;
  /** The transport exists (IN_PROCESS_TRANSPORT_AVAILABLE; a parameter so both states are tested). */
  available: boolean;
}

export function chooseBroker(probe: Probe, inProcess: InProcess): BrokerChoice {
  if (probe.configuredUrl !== undefined)
    return probe.reachable
      ? { use: 'rabbitmq', url: probe.configuredUrl }
      : {
          use: 'none',
          reason: `AMQP_URL is set, and ${probe.failure ?? `RabbitMQ at ${probe.where} is not reachable`}`,
        };
  if (probe.reachable) return { use: 'rabbitmq', url: probe.probeUrl };
  if (inProcess.accepted && inProcess.available) return { use: 'in-process' };
  const why = !inProcess.available
    ? 'the in-process transport lands with the transport seam'
    : 'this program needs a real broker';
  return {
    use: 'none',
    reason: `no RabbitMQ reachable at ${probe.where}; ${why} (install RabbitMQ, or set AMQP_URL)`,
  };
}

/** The one line that says what runs where, e.g. `PostgreSQL: embedded 18.4 (temporary, removed at exit) · RabbitMQ: 127.0.0.1:5672`. */
export function describeChoice(postgres: string, broker: string): string {
  return `PostgreSQL: ${postgres} · RabbitMQ: ${broker}`;
}
