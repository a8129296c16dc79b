/**
 * The HTTP side of the metrics subpath: /metrics for Prometheus and the two probes. Apart from
 * metrics.ts so that what is measured and how it is served change independently; the probes
 * know nothing of relays or consumers, they only call the checks they are given.
 */
import http from 'node:http';
import type client from 'prom-client';
import { z } from 'zod';
import { listenShape } from '../runtime/option-fields.js';
import { defineOptions, functionOption, type OptionsInput } from '../runtime/options.js';

export const serveMetricsOptions = defineOptions(
  'serveMetrics',
  z.strictObject({
    ...listenShape,
    ready: functionOption<() => boolean | Promise<boolean>>('() => boolean | Promise<boolean>')
      .optional()
      .describe(
        'Answers /readyz (readiness: send work here?): 200 while it returns true, 503 otherwise; always ready when omitted.',
      ),
    live: functionOption<() => boolean | Promise<boolean>>('() => boolean | Promise<boolean>')
      .optional()
      .describe(
        'Answers /healthz (liveness: restart me?): 200 while it returns true, 503 otherwise; always live when omitted. Keep it free of dependencies: a database outage is not cured by a restart.',
      ),
  }),
);

/**
 * Serves `registry` on `/metrics` (Prometheus text format), `/healthz` (liveness: 200 while
 * `live()` says so) and `/readyz` (readiness: 200 while `ready()` says so, 503 otherwise).
 * /metrics answers 200 while the database is down: its gauges are then absent and
 * `converge_database_up` is 0. Resolves once listening; `server.address().port` is the bound
 * port (with port 0, a free one).
 */
export async function serveMetrics(
  registry: client.Registry,
  input: OptionsInput<typeof serveMetricsOptions>,
): Promise<http.Server> {
  const options = serveMetricsOptions.parse(input);
  const server = http.createServer((req, res) => {
    if (req.url === '/healthz') {
      probe(res, options.live, 'ok', 'stopped');
      return;
    }
    if (req.url === '/readyz') {
      probe(res, options.ready, 'ready', 'not ready');
      return;
    }
    if (req.url !== '/metrics') {
      res.writeHead(404).end();
      return;
    }
    registry.metrics().then(
      (body) => res.writeHead(200, { 'content-type': registry.contentType }).end(body),
      // The database may be down; say so without details (they could name hosts or users).
      () => res.writeHead(503, { 'content-type': 'text/plain' }).end('metrics unavailable\n'),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => resolve());
  });
  return server;
}

function probe(
  res: http.ServerResponse,
  check: (() => boolean | Promise<boolean>) | undefined,
  yes: string,
  no: string,
): void {
  const answer = (ok: boolean) =>
    res.writeHead(ok ? 200 : 503, { 'content-type': 'text/plain' }).end(`${ok ? yes : no}\n`);
  Promise.resolve()
    .then(() => (check ? check() : true))
    .then(answer, () => answer(false));
}
