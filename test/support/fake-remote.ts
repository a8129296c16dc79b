/**
 * A remote service for the effects tests (an SMS or payment API): an HTTP server on 127.0.0.1 that
 * deduplicates by the `Idempotency-Key` header, as the remote of docs/remote-effects.md must. It
 * counts every call and every effect performed (the first successful call per key); `failNext`
 * makes the next calls answer 503 (retry later) or 422 (never accepted).
 */
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { PermanentError } from '../../src/runtime/errors.js';

export interface FakeRemote {
  url: string;
  /** The key of every call, in order. */
  calls: string[];
  /** Keys whose effect was performed, once each. */
  performed: string[];
  /** The next `times` calls fail with this status, performing nothing. */
  failNext(status: 503 | 422, times?: number): void;
  close(): Promise<void>;
}

export async function startFakeRemote(): Promise<FakeRemote> {
  const results = new Map<string, { receipt: string }>();
  const calls: string[] = [];
  const performed: string[] = [];
  const failures: number[] = [];
  const server: Server = createServer((request, response) => {
    request.resume();
    request.on('end', () => {
      const key = request.headers['idempotency-key'];
      if (typeof key !== 'string') return void response.writeHead(400).end();
      calls.push(key);
      const failure = failures.shift();
      if (failure) return void response.writeHead(failure).end();
      let result = results.get(key);
      if (!result) {
        result = { receipt: `r${results.size + 1}` };
        results.set(key, result);
        performed.push(key);
      }
      response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(result));
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/messages`,
    calls,
    performed,
    failNext(status, times = 1) {
      for (let i = 0; i < times; i++) failures.push(status);
    },
    async close() {
      server.closeAllConnections();
      server.close();
      await once(server, 'close');
    },
  };
}

/**
 * The remote call as a user writes it: the key in the remote's idempotency header, a 4xx (other than
 * 429) is a PermanentError, anything else that is not 2xx is retryable. The message names the status only.
 */
export async function sendMessage(url: string, key: string, signal: AbortSignal): Promise<{ receipt: string }> {
  const response = await fetch(url, { method: 'POST', headers: { 'idempotency-key': key }, body: '{}', signal });
  if (response.ok) return (await response.json()) as { receipt: string };
  if (response.status >= 400 && response.status < 500 && response.status !== 429) {
    throw new PermanentError(`remote refused the message (HTTP ${response.status})`);
  }
  throw new Error(`remote unavailable (HTTP ${response.status})`);
}
