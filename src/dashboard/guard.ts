/**
 * The dashboard's request checks. It serves operators on their own machine, so the threats are
 * other web pages in the same browser (cross-site requests, DNS rebinding, framing) and other
 * local users: every request must name the dashboard in its Host header, API calls from another
 * site are refused, and actions need the token (sent in a custom header, which a cross-site
 * form cannot set), compared in constant time. No CORS header is ever sent.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type http from 'node:http';
import { isIP } from 'node:net';

export const TOKEN_HEADER = 'x-converge-token';

const LOOPBACK = new Set(['127.0.0.1', '::1', 'localhost']);
const WILDCARD = new Set(['0.0.0.0', '::']);

/** Sent with every response: no framing, no sniffing, scripts and styles from this origin only. */
export const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  'content-security-policy':
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-resource-policy': 'same-origin',
  'cache-control': 'no-store',
};

/**
 * The Host header values that name this server: the bound address, and for a loopback address
 * its aliases. Bound to a wildcard, only IP literals pass: a DNS-rebinding attack needs a name.
 */
export function hostMatcher(boundHost: string, port: number): (hostHeader: string | undefined) => boolean {
  const names = LOOPBACK.has(boundHost) ? LOOPBACK : new Set([boundHost]);
  return (hostHeader) => {
    if (!hostHeader) return false;
    const parsed = parseHost(hostHeader);
    if (!parsed || parsed.port !== port) return false;
    if (WILDCARD.has(boundHost)) return isIP(parsed.hostname) !== 0 || parsed.hostname === 'localhost';
    return names.has(parsed.hostname);
  };
}

function parseHost(value: string): { hostname: string; port: number } | undefined {
  try {
    const url = new URL(`http://${value}`);
    if (url.username || url.password || url.pathname !== '/') return undefined;
    const hostname = url.hostname.replace(/^\[(.*)\]$/, '$1');
    return { hostname, port: url.port === '' ? 80 : Number(url.port) };
  } catch {
    return undefined;
  }
}

/**
 * True unless the browser says the request comes from another site: an Origin header must be
 * this server's own origin (http + the Host it was sent to), and Sec-Fetch-Site, when sent,
 * must be same-origin (or none: typed into the address bar).
 */
export function sameOrigin(req: http.IncomingMessage): boolean {
  const site = req.headers['sec-fetch-site'];
  if (site !== undefined && site !== 'same-origin' && site !== 'none') return false;
  const origin = req.headers.origin;
  if (origin === undefined) return true;
  return origin === `http://${req.headers.host ?? ''}`;
}

/** Actions carry a JSON body: a cross-site form can send neither this content type nor the token header. */
export function isJson(req: http.IncomingMessage): boolean {
  const type = req.headers['content-type'] ?? '';
  return type.split(';')[0]!.trim().toLowerCase() === 'application/json';
}

/** Constant time in the token's content and length: both sides are hashed to 32 bytes first. */
export function tokenMatches(expected: string, given: string | string[] | undefined): boolean {
  if (typeof given !== 'string') return false;
  const digest = (text: string) => createHash('sha256').update(text, 'utf8').digest();
  return timingSafeEqual(digest(expected), digest(given));
}
