import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { EventEnvelope } from '../../src/envelope/envelope.js';
import { validateEnvelope } from '../../src/envelope/validate.js';
import { EnvelopeValidationError } from '../../src/runtime/errors.js';
import { publishableEnvelope, outboxRowToEnvelope } from '../../src/relay/row.js';
import type { OutboxEnvelopeRow } from '../../src/relay/sql.js';
import { encodeMessage, routingKeyFromTemplate, DEFAULT_ROUTING_KEY } from '../../src/transport/wire.js';
import { nestedPaymentEvent } from '../support/builders.js';

const base: EventEnvelope = nestedPaymentEvent;

describe('publishableEnvelope', () => {
  const row: OutboxEnvelopeRow = {
    event_id: base.eventId,
    aggregate_type: base.aggregateType,
    aggregate_id: base.aggregateId,
    aggregate_version: '3',
    event_type: base.eventType,
    schema_version: 1,
    kind: 'incremental',
    payload: base.payload,
    occurred_at: new Date(base.occurredAt),
    traceparent: null,
    tenant_id: 'acme',
  };

  it('encodes to the same bytes as the fully validated envelope', () => {
    const routingKey = routingKeyFromTemplate(DEFAULT_ROUTING_KEY);
    const fast = encodeMessage(publishableEnvelope(row), routingKey);
    const full = encodeMessage(validateEnvelope(outboxRowToEnvelope(row)), routingKey);
    assert.equal(fast.content.toString(), full.content.toString());
    assert.deepEqual(fast.options, full.options);
    assert.equal(fast.routingKey, full.routingKey);
  });

  it('still names the field of a row the full validation refuses', () => {
    assert.throws(
      () => publishableEnvelope({ ...row, aggregate_id: ' ' }),
      (err: unknown) => err instanceof EnvelopeValidationError && err.field === 'aggregateId',
    );
  });
});
