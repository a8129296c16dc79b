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

const UNPARSEABLE = '(unparseable url)';

/** undefined rather than URL's TypeError, whose message quotes the input, password included. */
export function parseUrl(url: string): URL | undefined {
  try {
    return new URL(url);
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
  if (connectionString.startsWith('/')) {
    const [path, database] = connectionString.split(' ');
    return { endpoint: path!, ...(database ? { name: database } : {}) };
  }
  const url = parseUrl(connectionString);
  if (!url) return { endpoint: UNPARSEABLE };
  if (url.protocol === 'socket:') {
    const database = url.searchParams.get('db');
    return { endpoint: decodeURI(url.pathname), ...(database ? { name: database } : {}) };
  }
  const host = url.searchParams.get('host');
  const port = url.searchParams.get('port');
  const database = decodeURIComponent(url.pathname.slice(1));
  return {
    endpoint: host ? `${host}:${port || url.port || 5432}` : hostPort(url, Number(port) || 5432),
    ...(database ? { name: database } : {}),
  };
}

/** Where an AMQP URL points: host:port (5672, or 5671 for amqps) and the vhost. */
export function brokerTarget(amqpUrl: string): ConnectionTarget {
  const url = parseUrl(amqpUrl);
  if (!url) return { endpoint: UNPARSEABLE };
  const vhost = url.pathname.length > 1 ? decodeURIComponent(url.pathname.slice(1)) : '/';
  return { endpoint: hostPort(url, url.protocol === 'amqps:' ? 5671 : 5672), name: vhost };
}
