import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { EventEnvelope } from '../../src/envelope/envelope.js';
import { parseEnvelope } from '../../src/envelope/validate.js';
import { ConfigError } from '../../src/runtime/errors.js';
import {
  CONTENT_TYPE,
  DEFAULT_ROUTING_KEY,
  HEADER,
  PARTITION_PROPERTY,
  encodeMessage,
  legacyHeaders,
  partitionKey,
  routingKeyFromTemplate,
} from '../../src/transport/wire.js';
import { readAttempt, traceFields } from '../../src/inbox/headers.js';
import { orderEvent } from '../support/builders.js';

function envelope(overrides: Partial<EventEnvelope> = {}): EventEnvelope {
  return orderEvent('c2d4a1e0-5b7f-4f1a-8d2e-3a9b0c1d2e3f', 'o-7', 12, {
    eventType: 'OrderPaid',
    schemaVersion: 2,
    payload: { amount: 10, nested: { list: [1, 'two', null, { three: 3 }] } },
    occurredAt: '2024-05-01T10:00:00.750Z',
    ...overrides,
  });
}

const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';

describe('encodeMessage', () => {
  it('mirrors the envelope in the AMQP properties', () => {
    const { options } = encodeMessage(envelope(), routingKeyFromTemplate(DEFAULT_ROUTING_KEY));
    assert.equal(options.messageId, 'c2d4a1e0-5b7f-4f1a-8d2e-3a9b0c1d2e3f');
    assert.equal(options.type, 'OrderPaid');
    assert.equal(options.contentType, CONTENT_TYPE);
    assert.equal(CONTENT_TYPE, 'application/json');
    // Persistent and mandatory: the broker must write it to disk and must not drop it unrouted.
    assert.equal(options.persistent, true);
    assert.equal(options.mandatory, true);
  });

  it('sets the AMQP timestamp in whole seconds, as the protocol defines it', () => {
    const { options } = encodeMessage(envelope(), routingKeyFromTemplate(DEFAULT_ROUTING_KEY));
    assert.equal(options.timestamp, Date.UTC(2024, 4, 1, 10, 0, 0) / 1000);
    const offset = encodeMessage(
      envelope({ occurredAt: '2024-05-01T12:00:00.999+02:00' }),
      routingKeyFromTemplate(DEFAULT_ROUTING_KEY),
    );
    assert.equal(offset.options.timestamp, Date.UTC(2024, 4, 1, 10, 0, 0) / 1000);
  });

  it('sends no header table for an event without a traceparent: every field is in the body', () => {
    const { options } = encodeMessage(envelope({ tenantId: 'tenant-a' }), routingKeyFromTemplate(DEFAULT_ROUTING_KEY));
    assert.equal(options.headers, undefined);
  });

  it('carries the traceparent as the one header, so a consumer continues the trace before parsing', () => {
    const { options } = encodeMessage(
      envelope({ tenantId: 'tenant-a', traceparent, kind: 'snapshot' }),
      routingKeyFromTemplate(DEFAULT_ROUTING_KEY),
    );
    assert.deepEqual(options.headers, { [HEADER.traceparent]: traceparent });
  });

  it('carries the partition key in correlation_id, the property the partition exchange hashes', () => {
    const { options } = encodeMessage(envelope(), routingKeyFromTemplate(DEFAULT_ROUTING_KEY));
    assert.equal(PARTITION_PROPERTY, 'correlation_id');
    assert.equal(options.correlationId, 'order/o-7');
    assert.equal(options.correlationId, partitionKey(envelope()));
  });

  it('puts the whole envelope in the body, which parses back to the same envelope', () => {
    for (const original of [
      envelope(),
      envelope({ tenantId: 'tenant-a', traceparent, kind: 'snapshot', payload: null }),
    ]) {
      const { content } = encodeMessage(original, routingKeyFromTemplate(DEFAULT_ROUTING_KEY));
      assert.ok(Buffer.isBuffer(content));
      assert.deepEqual(parseEnvelope(content), original);
    }
  });

  it('uses the routing key function it is given', () => {
    const message = encodeMessage(envelope(), () => 'fixed.key');
    assert.equal(message.routingKey, 'fixed.key');
  });
});

describe('routingKeyFromTemplate', () => {
  it("defaults to '{aggregateType}.{eventType}'", () => {
    assert.equal(DEFAULT_ROUTING_KEY, '{aggregateType}.{eventType}');
    assert.equal(routingKeyFromTemplate(DEFAULT_ROUTING_KEY)(envelope()), 'order.OrderPaid');
    assert.equal(encodeMessage(envelope(), routingKeyFromTemplate(DEFAULT_ROUTING_KEY)).routingKey, 'order.OrderPaid');
  });

  it('fills every supported placeholder', () => {
    const key = routingKeyFromTemplate('{tenantId}.{aggregateType}.{eventType}.v{schemaVersion}.{kind}');
    assert.equal(key(envelope({ tenantId: 'acme' })), 'acme.order.OrderPaid.v2.incremental');
  });

  it("writes '_' for an absent optional value, so the key keeps its shape", () => {
    const key = routingKeyFromTemplate('{tenantId}.{aggregateType}');
    assert.equal(key(envelope()), '_.order');
  });

  it('keeps literal text and templates without placeholders', () => {
    assert.equal(routingKeyFromTemplate('events.all')(envelope()), 'events.all');
    assert.equal(routingKeyFromTemplate('svc-{aggregateType}#')(envelope()), 'svc-order#');
  });

  it('rejects an unknown placeholder at configuration time, naming the option', () => {
    const cases: Array<[string, string | undefined, string]> = [
      ['{aggregateType}.{payload}', undefined, 'routingKey'],
      ['{aggregateId}', 'relay.routingKey', 'relay.routingKey'],
      ['{}', 'publish.key', 'publish.key'],
      ['{AggregateType}', undefined, 'routingKey'],
    ];
    for (const [template, field, expectedField] of cases) {
      assert.throws(
        () => (field === undefined ? routingKeyFromTemplate(template) : routingKeyFromTemplate(template, field)),
        (err: unknown) => {
          assert.ok(err instanceof ConfigError);
          assert.equal(err.code, 'CONVERGE_INVALID_CONFIG');
          assert.equal(err.field, expectedField);
          assert.match(err.message, /unknown placeholder/);
          return true;
        },
        template,
      );
    }
  });

  it('rejects a template longer than an AMQP short string', () => {
    assert.throws(
      () => routingKeyFromTemplate('k'.repeat(256)),
      (err: unknown) => err instanceof ConfigError && err.field === 'routingKey',
    );
    assert.equal(routingKeyFromTemplate('k'.repeat(255))(envelope()), 'k'.repeat(255));
  });
});

describe('partitionKey', () => {
  it('is the same for every event of one aggregate, and differs between aggregates', () => {
    const key = partitionKey(envelope());
    assert.equal(key, partitionKey(envelope({ aggregateVersion: 13, eventType: 'OrderShipped', tenantId: 't' })));
    assert.notEqual(key, partitionKey(envelope({ aggregateId: 'o-8' })));
    // Type and id both count: an id shared by two aggregate types is two aggregates.
    assert.notEqual(key, partitionKey({ aggregateType: 'invoice', aggregateId: 'o-7' }));
    // A type never contains '/', so type and id cannot trade characters.
    assert.notEqual(
      partitionKey({ aggregateType: 'a', aggregateId: 'b/c' }),
      partitionKey({ aggregateType: 'a.b', aggregateId: 'c' }),
    );
  });

  it('fits an AMQP short string whatever the id: a long one is replaced by its stable SHA-256', () => {
    const long = { aggregateType: 'order', aggregateId: 'ü'.repeat(200) };
    const key = partitionKey(long);
    assert.match(key, /^sha256:[0-9a-f]{64}$/);
    assert.equal(partitionKey({ ...long }), key);
    assert.notEqual(partitionKey({ ...long, aggregateId: 'ü'.repeat(199) }), key);
    const edge = { aggregateType: 'order', aggregateId: 'x'.repeat(255 - 'order/'.length) };
    assert.equal(partitionKey(edge), `order/${edge.aggregateId}`);
    assert.match(partitionKey({ ...edge, aggregateId: `${edge.aggregateId}x` }), /^sha256:/);
    const { options } = encodeMessage(envelope(long), routingKeyFromTemplate(DEFAULT_ROUTING_KEY));
    assert.ok(Buffer.byteLength(options.correlationId!) <= 255);
  });
});

describe('the consumer side reads both wire shapes', () => {
  const traced = envelope({ tenantId: 'tenant-a', traceparent });
  const current = encodeMessage(traced, routingKeyFromTemplate(DEFAULT_ROUTING_KEY));
  // What earlier versions sent: the same body, the envelope mirrored in a header table, no correlation_id.
  const { correlationId: _, ...oldProperties } = current.options;
  const old = { ...current, options: { ...oldProperties, headers: legacyHeaders(traced) } };

  it('legacyHeaders is the table earlier versions sent', () => {
    assert.deepEqual(old.options.headers, {
      'x-aggregate-type': 'order',
      'x-aggregate-id': 'o-7',
      'x-aggregate-version': 12,
      'x-schema-version': 2,
      'x-event-kind': 'incremental',
      'x-tenant-id': 'tenant-a',
      traceparent,
    });
  });

  it('gets the same envelope, trace id and attempt from either', () => {
    for (const message of [old, current]) {
      const delivery = { properties: { headers: message.options.headers as Record<string, unknown> | undefined } };
      assert.deepEqual(parseEnvelope(message.content), traced);
      assert.deepEqual(traceFields(delivery), { traceId: '4bf92f3577b34da6a3ce929d0e0e4736' });
      assert.deepEqual(traceFields(delivery, traced), { traceId: '4bf92f3577b34da6a3ce929d0e0e4736' });
      assert.equal(readAttempt(delivery), 1);
    }
  });

  it('takes the trace id from the envelope when a message has no header table at all', () => {
    const untraced = encodeMessage(envelope(), routingKeyFromTemplate(DEFAULT_ROUTING_KEY));
    const delivery = { properties: {} };
    assert.deepEqual(traceFields(delivery, parseEnvelope(untraced.content)), {});
    assert.deepEqual(traceFields(delivery, traced), { traceId: '4bf92f3577b34da6a3ce929d0e0e4736' });
    assert.equal(readAttempt(delivery), 1);
  });
});
