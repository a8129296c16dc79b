/**
 * `startDashboard`: a node:http server for the web page, its assets (embedded, nothing from a
 * CDN) and the JSON API. Every request passes the Host check; API calls the same-origin check;
 * actions (POST) also need a JSON body and the token header. Logs method, route and status,
 * never a body, a query string or a header value.
 */
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { pipelineStatusOptions, readPipelineStatus, type PipelineStatusOptions } from '../ops/index.js';
import { describeError, type Logger } from '../runtime/logger.js';
import { dashboardOptions, type DashboardOptions } from './options.js';
import { readDashboard, runAction, type Action, type ApiContext, type ApiResponse } from './api.js';
import { ASSETS } from './assets/index.js';
import { hostMatcher, isJson, sameOrigin, SECURITY_HEADERS, TOKEN_HEADER, tokenMatches } from './guard.js';
import { startSampler } from './sampler.js';

export interface Dashboard {
  /** The page's address with the token in its fragment (never sent to the server, never in its logs). */
  url: string;
  /** The address the server listens on, without the token. */
  origin: string;
  port: number;
  token: string;
  /** Stops sampling, closes the server and its connections; the pool stays the caller's. */
  close(): Promise<void>;
}

const MAX_BODY_BYTES = 16 * 1024;
const ACTION_ROUTE = /^\/api\/quarantine\/([1-9]\d{0,18})\/(show|replay|discard)$/;

/** Serves the dashboard until `close()`; resolves once listening. */
export async function startDashboard(input: DashboardOptions): Promise<Dashboard> {
  const options = dashboardOptions.parse(input);
  const statusOptions: PipelineStatusOptions = {
    schema: options.schema,
    queues: options.queues,
    ...(options.amqpUrl !== undefined ? { amqpUrl: options.amqpUrl } : {}),
    windowMs: options.windowMs,
    sampleMs: options.sampleMs,
    stallAfterMs: options.stallAfterMs,
  };
  // The queue specs are readPipelineStatus's: checked here, so a bad one fails the start, not every sample.
  pipelineStatusOptions.parse(statusOptions);
  const token = options.token ?? randomBytes(24).toString('base64url');
  const server = http.createServer();
  await listen(server, options.port, options.host);
  const port = (server.address() as AddressInfo).port;
  const sampler = startSampler(
    () => readPipelineStatus(options.pool, statusOptions),
    options.sampleIntervalMs,
    Math.max(1, Math.ceil(options.historyMs / options.sampleIntervalMs)),
    options.logger,
  );
  const context: ApiContext = {
    pool: options.pool,
    schema: options.schema,
    amqpUrl: options.amqpUrl,
    queues: options.queues,
    sampler,
    sampleIntervalMs: options.sampleIntervalMs,
    logger: options.logger,
  };
  const hostAllowed = hostMatcher(options.host, port);
  server.on('request', (req: http.IncomingMessage, res: http.ServerResponse) => {
    handle(req, hostAllowed, token, context).then(
      (response) => send(req, res, response, options.logger),
      (err: unknown) => {
        options.logger.error(describeError(err), 'dashboard: request failed');
        send(req, res, { status: 500, body: { error: 'internal error' } }, options.logger);
      },
    );
  });
  const origin = `http://${urlHost(options.host)}:${port}`;
  options.logger.info({ origin }, 'dashboard: listening');
  return {
    url: `${origin}/#token=${encodeURIComponent(token)}`,
    origin,
    port,
    token,
    async close() {
      await sampler.stop();
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
    },
  };
}

type Reply = ApiResponse | { status: number; asset: { type: string; body: string } };

async function handle(
  req: http.IncomingMessage,
  hostAllowed: (host: string | undefined) => boolean,
  token: string,
  context: ApiContext,
): Promise<Reply> {
  if (!hostAllowed(req.headers.host)) return { status: 403, body: { error: 'unknown Host' } };
  const path = (req.url ?? '/').split('?')[0]!;
  if (req.method === 'GET' || req.method === 'HEAD') {
    const asset = ASSETS[path];
    if (asset) return { status: 200, asset };
    if (!path.startsWith('/api/')) return { status: 404, body: { error: 'not found' } };
    if (!sameOrigin(req)) return { status: 403, body: { error: 'cross-site request' } };
    if (path === '/api/status') return readDashboard(context);
    return { status: 404, body: { error: 'not found' } };
  }
  if (req.method !== 'POST') return { status: 405, body: { error: 'method not allowed' } };
  const route = ACTION_ROUTE.exec(path);
  if (!route) return { status: 404, body: { error: 'not found' } };
  if (!sameOrigin(req)) return { status: 403, body: { error: 'cross-site request' } };
  if (!isJson(req)) return { status: 415, body: { error: 'actions take application/json' } };
  if (!tokenMatches(token, req.headers[TOKEN_HEADER]))
    return { status: 401, body: { error: 'missing or wrong token' } };
  const parsed = await readJson(req);
  if (!parsed.ok) return { status: parsed.status, body: { error: parsed.error } };
  return runAction(context, route[2] as Action, route[1]!, parsed.value);
}

async function readJson(
  req: http.IncomingMessage,
): Promise<{ ok: true; value: unknown } | { ok: false; status: number; error: string }> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) return { ok: false, status: 413, error: 'body too large' };
    chunks.push(chunk);
  }
  const text = Buffer.concat(chunks).toString('utf8');
  try {
    return { ok: true, value: text === '' ? {} : (JSON.parse(text) as unknown) };
  } catch {
    return { ok: false, status: 400, error: 'body is not JSON' };
  }
}

function send(req: http.IncomingMessage, res: http.ServerResponse, reply: Reply, logger: Logger): void {
  const [type, body] =
    'asset' in reply
      ? [reply.asset.type, reply.asset.body]
      : ['application/json; charset=utf-8', JSON.stringify(reply.body)];
  res.writeHead(reply.status, { ...SECURITY_HEADERS, 'content-type': type, 'content-length': Buffer.byteLength(body) });
  res.end(req.method === 'HEAD' ? undefined : body);
  // The route only: a query string is never logged, and bodies never are.
  logger.debug(
    { method: req.method, route: (req.url ?? '/').split('?')[0], status: reply.status },
    'dashboard: request',
  );
}

function listen(server: http.Server, port: number, host: string): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
}

/** The host part of the printed URL: a wildcard bind is reached through loopback, IPv6 in brackets. */
function urlHost(host: string): string {
  if (host === '0.0.0.0') return '127.0.0.1';
  if (host === '::') return '[::1]';
  return host.includes(':') ? `[${host}]` : host;
}
