import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { blankPattern, outboxBlankChecks, TRIMMED_CODE_POINTS } from '../../src/schema/outbox-checks.js';

const isSurrogate = (codePoint: number) => codePoint >= 0xd800 && codePoint <= 0xdfff;

/** Every code point (lone surrogates aside: no text column can hold them) that String.prototype.trim removes. */
function codePointsTrimRemoves(): number[] {
  const removed: number[] = [];
  for (let codePoint = 1; codePoint <= 0x10ffff; codePoint++)
    if (!isSurrogate(codePoint) && String.fromCodePoint(codePoint).trim() === '') removed.push(codePoint);
  return removed;
}

describe('outbox blank-id checks', () => {
  it('list exactly the code points trim removes, the consumer rule for a blank id', () => {
    const listed = TRIMMED_CODE_POINTS.flatMap(([from, to]) =>
      Array.from({ length: to - from + 1 }, (_, i) => from + i),
    );
    assert.deepEqual(listed, codePointsTrimRemoves());
  });

  it('write the class as \\u escapes, so no control character ends up in the DDL', () => {
    const pattern = blankPattern();
    assert.match(pattern, /^\^\[(\\u[0-9a-f]{4}(-\\u[0-9a-f]{4})?)+\]\*\$$/);
    assert.ok(pattern.includes('\\u2000-\\u200a'));
  });

  it('cover event_id, aggregate_id and a non-null tenant_id', () => {
    assert.deepEqual(
      outboxBlankChecks().map(([name]) => name),
      [
        'outbox_envelope_event_id_not_blank',
        'outbox_envelope_aggregate_id_not_blank',
        'outbox_envelope_tenant_id_not_blank',
      ],
    );
    assert.match(outboxBlankChecks()[2]![1], /^tenant_id IS NULL OR tenant_id !~ '/);
  });
});
