import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { formatBytes } from '../../src/runtime/bytes.js';

describe('formatBytes', () => {
  it('keeps bytes whole and gives one decimal in binary units above', () => {
    assert.equal(formatBytes(0), '0 B');
    assert.equal(formatBytes(1023), '1023 B');
    assert.equal(formatBytes(1536), '1.5 KiB');
    assert.equal(formatBytes(3 * 1024 ** 2), '3.0 MiB');
    assert.equal(formatBytes(1024 ** 3), '1.0 GiB');
    assert.equal(formatBytes(2048 * 1024 ** 4), '2048.0 TiB');
  });
});
