/** `npm run lab`: the article's six scenarios on the PostgreSQL and broker scripts/local-env.ts chose (RabbitMQ or in-process). */
import { runScenario, scenarios } from '../lab/scenarios.js';

let failed = 0;
let summary: string | undefined;
for (const scenario of scenarios) {
  const started = Date.now();
  try {
    const result = await runScenario(scenario);
    console.log(`ok   ${scenario.id} ${scenario.title} (${Date.now() - started} ms): ${result.checks.join('; ')}`);
    summary = result.summary ?? summary;
  } catch (err) {
    failed++;
    console.log(`FAIL ${scenario.id} ${scenario.title}: ${(err as Error).message}`);
  }
}
console.log(summary ?? 'published=? deliveries=? applied=? inbox=? amount=? (scenario 6 did not finish)');
console.log(`${scenarios.length - failed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
