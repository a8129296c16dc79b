import assert from 'node:assert/strict';
import { test } from 'node:test';
import { failureDigest } from '../../scripts/env/test-output.js';

const REPORT = [
  '▶ d',
  '  ✖ b (0.8ms)',
  '    AssertionError [ERR_ASSERTION]: one is not two',
  'ℹ fail 1',
  '',
  '✖ failing tests:',
  '',
  'test at f.test.mjs:2:38',
  '✖ b (0.8ms)',
  '  AssertionError [ERR_ASSERTION]: one is not two',
  '      at TestContext.<anonymous> (file:///tmp/f.test.mjs:2:59)',
  '      at Test.runInAsyncScope (node:async_hooks:206:9)',
  '      at Test.run (node:internal/test_runner/test:796:25) {',
  "    code: 'ERR_ASSERTION',",
  '  }',
].join('\n');

test("keeps the reporter's failing-tests section with the test's own frames and without the runner's", () => {
  assert.deepEqual(failureDigest(REPORT), [
    '',
    'test at f.test.mjs:2:38',
    '✖ b (0.8ms)',
    '  AssertionError [ERR_ASSERTION]: one is not two',
    '      at TestContext.<anonymous> (file:///tmp/f.test.mjs:2:59)',
    '  {',
    "    code: 'ERR_ASSERTION',",
    '  }',
  ]);
});

test('caps a long section and says how much it left out', () => {
  const digest = failureDigest(REPORT, 3);
  assert.deepEqual(digest, ['', 'test at f.test.mjs:2:38', '✖ b (0.8ms)', "… 5 more lines above in the file's output"]);
});

test('without a failing-tests section (a crash, a kill) it keeps the last lines', () => {
  assert.deepEqual(failureDigest('a\nb\nc\nSegmentation fault', 2), ['c', 'Segmentation fault']);
});
