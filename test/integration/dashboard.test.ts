// test-files: heavy, drives chromium
/**
 * The dashboard against the real services and a real browser (Debian's chromium through
 * playwright-core): the page shows a staged stall (an outbox row pending for ten minutes) and
 * the quarantine, shows a message only when asked and then with its personal data masked, and replays a quarantined message that the
 * running consumer then applies. The API refuses actions without the token, from another
 * site or to another Host, and no payload reaches the server's log. Screenshots go to
 * test-artifacts/ (gitignored).
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import { once } from 'node:events';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { appendToOutbox, applyIncrement, withTransaction, type Consumer, type Logger } from '../../src/index.js';
import { PermanentError } from '../../src/errors.js';
import { startDashboard, type Dashboard } from '../../src/dashboard/index.js';
import { listQuarantine, type QuarantineSummary } from '../../src/ops/index.js';
import { openBrokerFixture, type BrokerFixture } from '../support/broker-fixture.js';
import { after, before, describe, it, waitFor, orderEvent, AMQP_URL, type TestDatabase } from '../support/rig.js';
import { cli, runCli } from '../support/cli.js';

const ARTIFACTS = new URL('../../test-artifacts/', import.meta.url);
const SECRET = 'SECRET-CARD-4242-PII';
const TOKEN = 'test-token-0123456789abcdef';

/** Keeps every log record as one JSON line, to prove what never reaches the log. */
function capturingLogger(): Logger & { records: string[] } {
  const records: string[] = [];
  const keep = (obj: object, msg: string) => void records.push(JSON.stringify({ ...obj, msg }));
  return { records, debug: keep, info: keep, warn: keep, error: keep };
}

/** A raw request, so the Host and Origin headers are exactly what a test says. */
function request(
  dashboard: Dashboard,
  method: string,
  path: string,
  headers: Record<string, string> = {},
  body?: string,
): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port: dashboard.port,
        method,
        path,
        headers: { host: `127.0.0.1:${dashboard.port}`, ...headers },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

const action = (token?: string, extra: Record<string, string> = {}) => ({
  'content-type': 'application/json',
  ...(token === undefined ? {} : { 'x-converge-token': token }),
  ...extra,
});

describe('dashboard', () => {
  let fixture: BrokerFixture;
  let db: TestDatabase;
  let queue: string;
  let consumer: Consumer;
  let dashboard: Dashboard;
  let browser: BrowserContext;
  let profile: string;
  const logger = capturingLogger();
  let fixed = false;

  const quarantined = async (eventId: string): Promise<QuarantineSummary | undefined> =>
    (await listQuarantine(db.pool, { schema: db.schema, includeResolved: true })).find((q) => q.eventId === eventId);

  before(async () => {
    fixture = await openBrokerFixture('cvdash');
    ({ db, queue } = fixture);
    await db.pool.query(
      `CREATE TABLE "${db.schema}".refunds (event_id text PRIMARY KEY, aggregate_id text NOT NULL, amount int NOT NULL)`,
    );
    consumer = fixture.startConsumer({
      handlers: {
        Refunded: async (event, { tx }) => {
          if (!fixed) throw new PermanentError('refunds are not supported yet');
          await applyIncrement(tx, { projection: 'refunds', event, schema: db.schema }, () =>
            tx.query(`INSERT INTO "${db.schema}".refunds VALUES ($1, $2, $3)`, [
              event.eventId,
              event.aggregateId,
              (event.payload as { amount: number }).amount,
            ]),
          );
        },
      },
    });
    await consumer.ready();
    // Two refunds the handler cannot apply yet: quarantined, with the secret in their payload.
    const refund = (eventId: string, aggregateId: string) =>
      orderEvent(eventId, aggregateId, 1, { eventType: 'Refunded', payload: { amount: 5, card: SECRET } });
    await fixture.publish([refund('R1', 'o-1'), refund('R2', 'o-2')]);
    await waitFor(() => consumer.stats.quarantined === 2, 'both refunds quarantined');
    // The staged stall: an event nobody relays, pending for ten minutes.
    await withTransaction(db.pool, (tx) =>
      appendToOutbox(
        tx,
        {
          aggregateType: 'order',
          aggregateId: 'o-9',
          aggregateVersion: 1,
          eventType: 'Paid',
          payload: { card: SECRET },
        },
        { schema: db.schema },
      ),
    );
    await db.pool.query(`UPDATE "${db.schema}".outbox SET occurred_at = now() - interval '10 minutes'`);

    dashboard = await startDashboard({
      pool: db.pool,
      schema: db.schema,
      amqpUrl: AMQP_URL,
      queues: [{ queue }],
      host: '127.0.0.1',
      port: 0,
      token: TOKEN,
      logger,
      sampleIntervalMs: 300,
      sampleMs: 100,
    });
    profile = mkdtempSync(join(tmpdir(), 'converge-chromium-'));
    browser = await chromium.launchPersistentContext(profile, {
      executablePath: '/usr/bin/chromium',
      headless: true,
      viewport: { width: 1360, height: 900 },
      // A zone with a half-hour offset and not the machine's, so the clock must name the browser's zone.
      timezoneId: 'Asia/Kolkata',
      args: [
        '--no-sandbox',
        '--disable-gpu',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
        '--no-first-run',
      ],
    });
    mkdirSync(ARTIFACTS, { recursive: true });
  });

  after(async () => {
    await browser?.close();
    if (profile) rmSync(profile, { recursive: true, force: true });
    await dashboard?.close();
    await fixture?.close();
  });

  const screenshot = (page: Page, name: string) =>
    page.screenshot({ path: new URL(`dashboard-${name}.png`, ARTIFACTS).pathname, fullPage: true });

  it('shows the staged stall and the quarantine, shows a masked message on request, and replays a message the consumer applies', async () => {
    const page = await browser.newPage();
    const problems: string[] = [];
    page.on('console', (message) => {
      if (message.type() === 'error') problems.push(message.text());
    });
    page.on('pageerror', (err) => problems.push(err.message));
    const r1 = (await quarantined('R1'))!;

    await page.goto(dashboard.url);
    const stall = page.locator('.finding[data-kind="outbox-growing"]');
    await stall.waitFor();
    assert.match(await stall.innerText(), /stalled/i);
    assert.match(await stall.innerText(), /1 unpublished .* oldest 6\d\d s/);
    assert.equal(await page.locator('#state').innerText(), 'STALLED');
    assert.equal(await page.locator('#pending').innerText(), '1');
    // The clock: a date, a time and the browser's zone, and the instant a sample was taken (one just now).
    const clock = /^checked (\d{4}-\d{2}-\d{2}) (\d{2}:\d{2}:\d{2}) UTC\+05:30 · /.exec(
      await page.locator('#checked').innerText(),
    );
    assert.ok(clock, `the clock names date and zone: ${await page.locator('#checked').innerText()}`);
    const shownAt = Date.parse(`${clock[1]}T${clock[2]}+05:30`);
    assert.ok(Math.abs(Date.now() - shownAt) < 60_000, `the clock shows now: ${clock[0]}`);
    // The token moved from the address bar into the tab's session storage.
    assert.equal(new URL(page.url()).hash, '');
    const row = page.locator(`#quarantine tr[data-id="${r1.id}"]`);
    assert.equal(await row.locator('.state').innerText(), 'open');
    // The backlog chart draws once the ring holds a few samples.
    const backlogPath = page.locator('#chart-backlog path.series').first();
    await waitFor(
      async () => ((await backlogPath.getAttribute('d', { timeout: 1_000 })) ?? '').split('L').length >= 3,
      'three samples drawn',
    );
    // The backlog counts rows (1 pending): its value axis ticks in whole numbers only.
    const backlogTicks = (await page.locator('#chart-backlog text.axis').allTextContents()).filter(
      (text) => !/^(now|-[\d.]+ (s|min))$/.test(text),
    );
    assert.ok(backlogTicks.length >= 2, `value ticks drawn: ${backlogTicks.join(', ')}`);
    assert.ok(
      backlogTicks.every((text) => /^\d+k?$/.test(text)),
      `whole-number ticks on a count chart: ${backlogTicks.join(', ')}`,
    );
    assert.ok(!(await page.content()).includes(SECRET), 'no payload on the page before it is asked for');
    await screenshot(page, 'stall');

    await row.locator('button[data-action="show"]').click();
    // A message that says nothing about its fields (no x-converge-sensitive header) has its whole payload masked.
    await page.locator('#payload').getByText('"payload": "[redacted]"').waitFor();
    assert.ok(!(await page.content()).includes(SECRET), 'personal data stays masked on the page');
    await screenshot(page, 'payload');

    fixed = true;
    await row.locator('button[data-action="replay"]').click();
    assert.equal(await page.locator('#replay-queue').inputValue(), queue, 'the queue of the consumer, prefilled');
    await page.locator('#replay-note').fill('refund handler shipped');
    await page.locator('#replay-confirm').click();
    await page.locator('#action-result').getByText(`replayed to ${queue}`).waitFor();
    await row.locator('.state').getByText('replayed → applied').waitFor({ timeout: 15_000 });

    const replayed = (await quarantined('R1'))!;
    assert.deepEqual(
      [replayed.resolution, replayed.replayOutcome, replayed.resolutionNote],
      ['replayed', 'applied', `to ${queue}: refund handler shipped`],
    );
    const refunds = await db.pool.query(`SELECT event_id, amount FROM "${db.schema}".refunds`);
    assert.deepEqual(refunds.rows, [{ event_id: 'R1', amount: 5 }], 'the projection holds the replayed refund');
    await page.locator('#action-close').click();
    // This is docs/images/dashboard.png: wait for a sample taken after the replay, so the findings
    // (sampled) and the quarantine (read on each poll) agree on how many messages are open.
    const quarantineFinding = page.locator('.finding[data-kind="quarantined"]');
    await quarantineFinding.getByText('1 open quarantined message(s)').waitFor({ timeout: 15_000 });
    assert.equal(await page.locator('#quarantined').innerText(), '1', 'the card agrees with the finding');
    assert.equal(await page.locator('#quarantine .state-open').count(), 1, 'the table agrees with the finding');
    await screenshot(page, 'replayed');

    assert.deepEqual(problems, [], 'no console error (a CSP violation would show here)');
    await page.close();
  });

  it('refuses actions without the token, from another site or to another Host; sends the security headers', async () => {
    const r2 = (await quarantined('R2'))!;
    const show = `/api/quarantine/${r2.id}/show`;

    assert.equal((await request(dashboard, 'POST', show, action())).status, 401, 'no token');
    assert.equal((await request(dashboard, 'POST', show, action('wrong-token-0123456789'))).status, 401, 'wrong token');
    assert.equal(
      (await request(dashboard, 'POST', show, action(TOKEN, { origin: 'http://evil.example' }))).status,
      403,
      'cross-site Origin',
    );
    assert.equal(
      (await request(dashboard, 'POST', show, action(TOKEN, { 'sec-fetch-site': 'cross-site' }))).status,
      403,
      'cross-site fetch',
    );
    assert.equal(
      (await request(dashboard, 'POST', show, action(TOKEN, { host: `evil.example:${dashboard.port}` }))).status,
      403,
      'a rebound DNS name',
    );
    assert.equal(
      (await request(dashboard, 'GET', '/api/status', { host: `evil.example:${dashboard.port}` })).status,
      403,
      'reads too',
    );
    assert.equal(
      (await request(dashboard, 'POST', show, { 'content-type': 'text/plain', 'x-converge-token': TOKEN })).status,
      415,
      'a form-encodable content type',
    );
    assert.equal((await request(dashboard, 'GET', show)).status, 404, 'actions are POST only');

    const page = await request(dashboard, 'GET', '/');
    assert.equal(page.status, 200);
    assert.match(String(page.headers['content-security-policy']), /default-src 'self'/);
    assert.match(String(page.headers['content-security-policy']), /frame-ancestors 'none'/);
    assert.equal(page.headers['x-frame-options'], 'DENY');
    assert.equal(page.headers['x-content-type-options'], 'nosniff');
    assert.equal(page.headers['access-control-allow-origin'], undefined, 'no CORS');
    assert.doesNotMatch(page.body, /https?:\/\/(?!www\.w3\.org)/, 'no asset from another host');

    const status = await request(dashboard, 'GET', '/api/status');
    assert.equal(status.status, 200);
    assert.ok(!status.body.includes(SECRET), 'the status read carries no payload');

    const shown = await request(
      dashboard,
      'POST',
      show,
      action(TOKEN, { origin: `http://127.0.0.1:${dashboard.port}` }),
    );
    assert.equal(shown.status, 200);
    assert.equal(
      (JSON.parse(shown.body) as { masking: string }).masking,
      'payload',
      'the message, its payload masked (unknown fields)',
    );
    assert.ok(!shown.body.includes(SECRET), 'never the personal data: that is for dlq show --show-sensitive');

    const discard = `/api/quarantine/${r2.id}/discard`;
    const blank = await request(dashboard, 'POST', discard, action(TOKEN), JSON.stringify({ reason: '  ' }));
    assert.equal(blank.status, 400, 'a discard needs a reason');
    assert.equal((await quarantined('R2'))!.resolvedAt, null);
    const discarded = await request(
      dashboard,
      'POST',
      discard,
      action(TOKEN),
      JSON.stringify({ reason: 'test refund' }),
    );
    assert.equal(discarded.status, 200);
    assert.deepEqual(
      [(await quarantined('R2'))!.resolution, (await quarantined('R2'))!.resolutionNote],
      ['discarded', 'test refund'],
    );
    const again = await request(dashboard, 'POST', discard, action(TOKEN), JSON.stringify({ reason: 'twice' }));
    assert.equal(again.status, 409, 'already resolved');
    assert.equal(
      (await request(dashboard, 'POST', '/api/quarantine/999999/show', action(TOKEN))).status,
      404,
      'unknown id',
    );

    const log = logger.records.join('\n');
    assert.match(log, /dashboard: show quarantined message/, 'the log sees the actions');
    assert.ok(!log.includes(SECRET), 'no payload in the log');
    assert.ok(!log.includes(TOKEN), 'no token in the log');
  });

  it('a discard answers after a fresh sample: the next status read no longer counts the row, whatever the interval', async () => {
    // An event type the consumer has no handler for: quarantined as unknown-event-type.
    await fixture.publish([orderEvent('U1', 'o-3', 1)]);
    const u1 = await waitFor(() => quarantined('U1'), 'the unknown type quarantined');
    // A minute between samples: only a sample taken by the action itself can show its effect.
    const slow = await startDashboard({
      pool: db.pool,
      schema: db.schema,
      host: '127.0.0.1',
      port: 0,
      token: TOKEN,
      logger,
      sampleIntervalMs: 60_000,
      sampleMs: 100,
    });
    type Status = { status: { failures: { quarantined: Record<string, number> } } | null };
    const read = async () => (JSON.parse((await request(slow, 'GET', '/api/status')).body) as Status).status;
    try {
      const first = await waitFor(async () => (await read()) ?? undefined, 'the first sample');
      assert.equal(first.failures.quarantined['unknown-event-type'], 1);
      const discarded = await request(
        slow,
        'POST',
        `/api/quarantine/${u1.id}/discard`,
        action(TOKEN),
        JSON.stringify({ reason: 'no such handler' }),
      );
      assert.equal(discarded.status, 200);
      const next = (await read())!;
      assert.equal(next.failures.quarantined['unknown-event-type'], undefined, 'the findings saw the discard');
    } finally {
      await slow.close();
    }
  });

  it('converge dashboard prints its URL with the token in the fragment, serves the page, and stops on SIGTERM', async () => {
    const child = runCli(['--schema', db.schema, 'dashboard', '--port', '0', '--token', TOKEN, '--queue', queue]);
    let stdout = '';
    child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    const exited = once(child, 'exit');
    try {
      const url = new URL(
        await waitFor(() => /dashboard on (http:\/\/127\.0\.0\.1:\d+\/#token=\S+)/.exec(stdout)?.[1], 'the URL line'),
      );
      assert.equal(url.hash, `#token=${TOKEN}`);
      const cliDashboard = { port: Number(url.port) } as Dashboard;
      const status = await waitFor(async () => {
        const response = await request(cliDashboard, 'GET', '/api/status');
        const body = JSON.parse(response.body) as { status: { outbox: { pending: number } } | null };
        return body.status ?? undefined;
      }, 'a first sample');
      assert.equal(status.outbox.pending, 1);
      assert.equal((await request(cliDashboard, 'POST', '/api/quarantine/1/show', action())).status, 401);
    } finally {
      child.kill('SIGTERM');
    }
    const [code] = (await exited) as [number | null];
    assert.equal(code, 0);
    assert.ok(!stdout.includes(SECRET), 'no payload in the output');
  });

  it('converge dashboard refuses a short token and an unmigrated schema before it listens', async () => {
    const short = await cli(['--schema', db.schema, 'dashboard', '--port', '0', '--token', 'short']);
    assert.equal(short.code, 1);
    assert.match(short.stderr, /CONVERGE_INVALID_CONFIG: .*token/);
    assert.doesNotMatch(short.stdout, /dashboard on/);
    const unmigrated = await cli(['--schema', 'cvt_never_migrated', 'dashboard', '--port', '0']);
    assert.equal(unmigrated.code, 1);
    assert.match(unmigrated.stderr, /CONVERGE_SCHEMA_NOT_MIGRATED/);
  });
});
