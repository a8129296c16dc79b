/** The article's six scenarios, as the same code `npm run lab` prints, on RabbitMQ and on the in-process transport. */
import assert from 'node:assert/strict';
import type { LabTransportKind } from '../../lab/broker.js';
import { runScenario, scenarios } from '../../lab/scenarios.js';
import { test } from '../support/rig.js';

for (const kind of ['rabbitmq', 'in-process'] satisfies LabTransportKind[])
  for (const scenario of scenarios) {
    test(`scenario ${scenario.id} (${kind}): ${scenario.title}`, async () => {
      const result = await runScenario(scenario, kind);
      assert.ok(result.checks.length >= 3, 'a scenario checks several facts');
      if (scenario.id === 6) assert.equal(result.summary, 'published=2 deliveries=3 applied=1 inbox=1 amount=10');
    });
  }
