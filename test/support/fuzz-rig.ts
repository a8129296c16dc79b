/**
 * The consumer fuzzer's harness (test/integration/fuzz-consumer.test.ts): one consumer on one
 * queue for the whole run, a raw publisher, and for each generated case the outcome it must
 * have. A case is published, its one outcome awaited (applied, or quarantined with a reason),
 * checked against what the message allows, and counted for the run's summary.
 */
import assert from 'node:assert/strict';
import {
  RabbitMqTransport,
  type Consumer,
  type EventHandler,
  type Settlement,
  type Transport,
} from '../../src/index.js';
import { parseEnvelope } from '../../src/envelope/validate.js';
import { BodyTooLargeError, MalformedBodyError } from '../../src/runtime/errors.js';
import { scanFieldTable } from '../../src/transport/header-bounds.js';
import { capturingLogger, type Env } from './consumer-env.js';
import { SECRET_MARK, materialise, type HostileCase, type Materialised } from './hostile-messages.js';
import { RawAmqpRefused, openRawPublisher, type RawPublisher } from './raw-amqp.js';
import { AMQP_URL, waitFor } from './rig.js';

/** Handler failures before quarantine: small, so a failing case costs a few retry trips of ≤100 ms. */
export const MAX_ATTEMPTS = 3;
/** One message's outcome, retries included, comes well within this; more is a stuck message. */
const CASE_TIMEOUT_MS = 10_000;

/** RabbitMQ's transport, counting the connections the consumer opens: one per session. */
export function countingTransport(): Transport & { connects: number } {
  const transport = new RabbitMqTransport({ urls: AMQP_URL });
  const counting = {
    kind: transport.kind,
    connects: 0,
    failure: (err: unknown) => transport.failure(err),
    connect: (request: Parameters<Transport['connect']>[0]) => {
      counting.connects++;
      return transport.connect(request);
    },
  };
  return counting;
}

/**
 * AmountAdded: fails `payload.failTimes` times (counted per eventId), then writes its `applied`
 * row. Its error names no payload value.
 */
export function failingHandler(schema: string): EventHandler & { calls: Map<string, number> } {
  const calls = new Map<string, number>();
  const handler: EventHandler = async (event, { tx }) => {
    const planned = (event.payload as { failTimes?: unknown } | null)?.failTimes;
    const seen = calls.get(event.eventId) ?? 0;
    calls.set(event.eventId, seen + 1);
    if (typeof planned === 'number' && seen < planned) throw new Error(`planned failure ${seen + 1}`);
    await tx.query(`INSERT INTO "${schema}".applied (event_id, aggregate_id, amount) VALUES ($1, $2, 0)`, [
      event.eventId,
      event.aggregateId,
    ]);
  };
  return Object.assign(handler, { calls });
}

/** What a case may end as: `applied`, `quarantined:<reason>`. */
export function allowedOutcomes(c: HostileCase, m: Materialised): string[] {
  if (m.headersBytes && !scanFieldTable(m.headersBytes).ok) return ['quarantined:undecodable-headers'];
  let envelope;
  try {
    envelope = parseEnvelope(m.body);
  } catch (err) {
    if (err instanceof BodyTooLargeError) return ['quarantined:body-too-large'];
    if (err instanceof MalformedBodyError) return ['quarantined:malformed-body'];
    return ['quarantined:invalid-envelope'];
  }
  // An independent check of the oracle: only bodies built as envelopes can become one.
  assert.ok(['valid', 'near-valid', 'sized'].includes(c.body.kind), `a ${c.body.kind} body parsed as an envelope`);
  const refused: string[] = [];
  if (envelope.eventType !== 'AmountAdded') refused.push('quarantined:unknown-event-type');
  if (envelope.schemaVersion !== 1) refused.push('quarantined:unsupported-schema-version');
  if (refused.length > 0) return refused;
  const planned = (envelope.payload as { failTimes?: unknown } | null)?.failTimes;
  const failures = typeof planned === 'number' ? planned : 0;
  // A forged attempt count changes how many retries are left (issue 26, defect 3): its named case checks it.
  if (failures > 0 && forgesAttempt(c)) return ['applied', 'quarantined:handler-failed'];
  return [failures < MAX_ATTEMPTS ? 'applied' : 'quarantined:handler-failed'];
}

function forgesAttempt(c: HostileCase): boolean {
  return (c.headers ?? []).some(([key]) => key.toString() === 'x-converge-attempt');
}

/** What a run saw, for its summary line: outcomes by kind, quarantine reasons by count. */
export interface FuzzSummary {
  cases: number;
  outcomes: Record<string, number>;
  /** Publishes the broker refused (no delivery, so no outcome): `<scope> <code>`. */
  refused: Record<string, number>;
}

export function formatSummary(seed: number, summary: FuzzSummary): string {
  const list = (counts: Record<string, number>) =>
    Object.entries(counts)
      .sort((a, b) => b[1] - a[1])
      .map(([k, n]) => `${k}=${n}`)
      .join(', ') || 'none';
  return `fuzz seed=${seed} cases=${summary.cases} outcomes: ${list(summary.outcomes)}; refused by the broker: ${list(summary.refused)}`;
}

export interface CaseResult {
  /** `applied`, `quarantined:<reason>`, or `refused` (the broker did not take the message). */
  outcome: string;
  eventId: string;
  quarantineId?: string;
}

/** One consumer, one publisher, and the checks every case goes through. */
export class FuzzRun {
  readonly summary: FuzzSummary = { cases: 0, outcomes: {}, refused: {} };
  readonly logger = capturingLogger();
  readonly transport = countingTransport();
  readonly settled: Settlement[] = [];
  readonly errors: Error[] = [];
  readonly unhandled: unknown[] = [];
  #publisher: RawPublisher | null = null;
  #serial = 0;
  #consumer: Consumer | null = null;
  readonly handler: ReturnType<typeof failingHandler>;
  readonly #onUnhandled = (reason: unknown) => void this.unhandled.push(reason);

  constructor(
    readonly env: Env,
    readonly runId: string,
  ) {
    this.handler = failingHandler(env.schema);
  }

  async start(): Promise<void> {
    process.on('unhandledRejection', this.#onUnhandled);
    process.on('uncaughtException', this.#onUnhandled);
    const consumer = this.env.start({
      handlers: { AmountAdded: this.handler },
      logger: this.logger,
      transport: this.transport,
      maxAttempts: MAX_ATTEMPTS,
    });
    consumer.on('settled', (s) => this.settled.push(s));
    consumer.on('error', (err) => this.errors.push(err));
    this.#consumer = consumer;
    await consumer.ready();
  }

  async close(): Promise<void> {
    process.off('unhandledRejection', this.#onUnhandled);
    process.off('uncaughtException', this.#onUnhandled);
    await this.#publisher?.close();
    if (this.#consumer) await this.env.stop(this.#consumer);
  }

  /** Publishes one case and checks its outcome (and the run's health). */
  async run(c: HostileCase): Promise<CaseResult> {
    // A rejection nobody handled during the last case fails this one at once, not after a timeout.
    assert.deepEqual(this.unhandled, [], 'no unhandled rejection or uncaught exception');
    const m = materialise(c, `cvfuzz-${this.runId}-${++this.#serial}`);
    const fromSettled = this.settled.length;
    const fromLog = this.logger.records.length;
    this.summary.cases++;
    this.#publisher ??= await openRawPublisher(AMQP_URL);
    const sent = await this.#publisher
      .publish({ exchange: '', routingKey: this.env.queue, body: m.body, propertiesBytes: m.propertiesBytes })
      .catch((err: unknown) => err);
    if (sent instanceof Error) {
      if (!(sent instanceof RawAmqpRefused)) {
        // The broker dropped the socket (a frame over frame_max): no delivery either.
        this.#publisher = null;
        this.#count(this.summary.refused, `socket ${sent.message}`);
        return { outcome: 'refused', eventId: m.eventId };
      }
      if (sent.scope === 'connection') this.#publisher = null;
      this.#count(this.summary.refused, `${sent.scope} ${sent.replyCode}`);
      return { outcome: 'refused', eventId: m.eventId };
    }
    assert.deepEqual(sent, { outcome: 'acked' }, 'published to the queue by name: routed and confirmed');
    const result = await this.#outcome(m, fromSettled);
    const allowed = allowedOutcomes(c, m);
    assert.ok(
      allowed.includes(result.outcome),
      `${m.eventId} ended ${result.outcome}, expected one of ${allowed.join(' | ')}`,
    );
    this.checkHealth(fromLog);
    this.#count(this.summary.outcomes, result.outcome);
    return result;
  }

  /** No crash, no unhandled rejection, no reconnect, no marked value in the log lines since `fromLog`. */
  checkHealth(fromLog = 0): void {
    assert.deepEqual(this.unhandled, [], 'no unhandled rejection or uncaught exception');
    assert.deepEqual(this.errors.map(String), [], 'the consumer reported no error');
    // The bound: the first session serves the whole run. A frame amqplib cannot decode would cost one.
    assert.equal(this.transport.connects, 1, 'no reconnect: every delivery was settled on the first session');
    const leaked = this.logger.records.slice(fromLog).filter((line) => line.includes(SECRET_MARK));
    assert.deepEqual(leaked, [], 'no payload or header value in a log line');
  }

  async #outcome(m: Materialised, from: number): Promise<CaseResult> {
    const final = await waitFor(
      () => this.settled.slice(from).find((s) => s.action === 'ack'),
      `the outcome of ${m.eventId}`,
      CASE_TIMEOUT_MS,
    );
    // Nothing else settled meanwhile: one message in flight, one outcome.
    assert.equal(this.settled.slice(from).filter((s) => s.action === 'ack').length, 1);
    if (final.action !== 'ack') throw new Error('unreachable');
    if (final.outcome === 'quarantined') {
      const { rows } = await this.env.pool.query<{ reason: string; detail: string }>(
        `SELECT reason, detail FROM "${this.env.schema}".quarantine WHERE id = $1`,
        [final.quarantineId],
      );
      assert.ok(rows[0]?.reason, `quarantine row ${final.quarantineId} has a reason`);
      assert.equal(rows[0].reason, final.reason);
      return { outcome: `quarantined:${final.reason}`, eventId: m.eventId, quarantineId: final.quarantineId };
    }
    assert.equal(final.outcome, 'applied', `${m.eventId}: only applied or quarantined, not ${final.outcome}`);
    const inbox = await this.env.count('SELECT count(*) AS n FROM $schema.inbox WHERE event_id = $1', [final.eventId]);
    const applied = await this.env.count('SELECT count(*) AS n FROM $schema.applied WHERE event_id = $1', [
      final.eventId,
    ]);
    assert.deepEqual({ inbox, applied }, { inbox: 1, applied: 1 }, `${final.eventId}: one inbox row, one applied row`);
    return { outcome: 'applied', eventId: m.eventId };
  }

  #count(counts: Record<string, number>, key: string): void {
    counts[key] = (counts[key] ?? 0) + 1;
  }
}
