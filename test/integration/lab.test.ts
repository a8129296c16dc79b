/** The article's six scenarios, as the same code `npm run lab` prints. */
import assert from 'node:assert/strict';
import { runScenario, scenarios } from '../../lab/scenarios.js';
import { test } from '../support/rig.js';

for (const scenario of scenarios) {
  test(`scenario ${scenario.id}: ${scenario.title}`, async () => {
    const result = await runScenario(scenario);
    assert.ok(result.checks.length >= 3, 'a scenario checks several facts');
    if (scenario.id === 6) assert.equal(result.summary, 'published=2 deliveries=3 applied=1 inbox=1 amount=10');
  });
}
