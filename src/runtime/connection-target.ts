/**
 * Where a connection goes, in the form messages and logs may show: host:port and the database
 * or vhost name, never a user or password. Apart from connection-failure.ts because every
 * component needs its targets up front (to name them in errors), classification only after an
 * attempt failed. Pure: it parses URLs, opens nothing.
 */

/** Where a connection goes, as far as messages may say: `host:port` plus the database or vhost name. */
export interface ConnectionTarget {
  endpoint: string;
  /** The database (PostgreSQL) or virtual host (RabbitMQ) named in the URL, when known. */
  name?: string;
}

import { parseHostList, type HostList } from './host-list.js';

const UNPARSEABLE = '(unparseable url)';

/** undefined rather than URL's TypeError, whose message quotes the input, password included. */
export function parseUrl(url: string): URL | undefined {
  try {
    return new URL(url);
  } catch {
    return undefined;
  }
}

/**
 * A PostgreSQL URL parsed as node-postgres parses it (pg-connection-string): spaces and stray `%`
 * encoded first, and an empty host (`postgres://user:pass@/db?host=/var/run/postgresql`, the
 * socket-directory form) read with a stand-in host, which `emptyHost` reports. undefined when pg
 * could not read it either, e.g. several hosts in one URL (`h1:5432,h2:5433`), which converge reads itself (host-list.ts).
 */
export function parseDatabaseUrl(connectionString: string): { url: URL; emptyHost: boolean } | undefined {
  const encoded = / |%[^a-f0-9]|%[a-f0-9][^a-f0-9]/i.test(connectionString)
    ? encodeURI(connectionString).replace(/%25(\d\d)/g, '%$1')
    : connectionString;
  const url = parseUrl(encoded);
  if (url) return { url, emptyHost: false };
  const standIn = parseUrl(encoded.replace('@/', '@converge-empty-host/'));
  return standIn ? { url: standIn, emptyHost: true } : undefined;
}

/** A usable host list, else undefined (one host, or a list checkDatabaseUrl refuses with its reason). */
function hostListOf(connectionString: string): HostList | undefined {
  try {
    return parseHostList(connectionString);
  } catch {
    return undefined;
  }
}

function hostPort(url: URL, defaultPort: number): string {
  return `${url.hostname || 'localhost'}:${url.port || defaultPort}`;
}

/**
 * Where a PostgreSQL connection string points. pg reads `postgres://`, `postgresql://`,
 * `socket:/path` and a bare socket path; anything else it would misread (`notaurl` becomes a
 * host named `base`), so checkDatabaseUrl rejects it first.
 */
export function databaseTarget(connectionString: string): ConnectionTarget {
  const list = hostListOf(connectionString);
  if (list) {
    const first = databaseTarget(list.urlFor(list.hosts[0]!));
    return { ...first, endpoint: list.hosts.map(({ host, port }) => `${host}:${port}`).join(',') };
  }
  if (connectionString.startsWith('/')) {
    const [path, database] = connectionString.split(' ');
    return { endpoint: path!, ...(database ? { name: database } : {}) };
  }
  const parsed = parseDatabaseUrl(connectionString);
  if (!parsed) return { endpoint: UNPARSEABLE };
  const { url, emptyHost } = parsed;
  if (url.protocol === 'socket:') {
    const database = url.searchParams.get('db');
    return { endpoint: decodeURI(url.pathname), ...(database ? { name: database } : {}) };
  }
  // A host in the query wins, as in pg; a percent-encoded one may be a socket directory (%2Fvar%2Frun...).
  const host =
    url.searchParams.get('host') ?? (emptyHost ? 'localhost' : decodeURIComponent(url.hostname) || 'localhost');
  const port = url.searchParams.get('port') || url.port || '5432';
  const database = decodeURIComponent(url.pathname.slice(1));
  return { endpoint: `${host}:${port}`, ...(database ? { name: database } : {}) };
}

/** Where an AMQP URL points: host:port (5672, or 5671 for amqps) and the vhost. */
export function brokerTarget(amqpUrl: string): ConnectionTarget {
  const url = parseUrl(amqpUrl);
  if (!url) return { endpoint: UNPARSEABLE };
  const vhost = url.pathname.length > 1 ? decodeURIComponent(url.pathname.slice(1)) : '/';
  return { endpoint: hostPort(url, url.protocol === 'amqps:' ? 5671 : 5672), name: vhost };
}
