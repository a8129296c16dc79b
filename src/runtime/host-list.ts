/**
 * libpq's multi-host connection strings (`postgres://u@db1:5432,db2:5432/app?target_session_attrs=read-write`),
 * which node-postgres does not read: the hosts in order and what a session must be to be kept. Pure:
 * the failover client (failover-client.ts) does the connecting.
 */

/** What a session must be, as libpq's target_session_attrs; converge writes, so only these three are accepted. */
export type TargetSessionAttrs = 'any' | 'read-write' | 'primary';

export interface HostPort {
  host: string;
  port: number;
}

export interface HostList {
  hosts: HostPort[];
  targetSessionAttrs: TargetSessionAttrs;
  /** The connection string for one of the hosts: the list replaced by it, target_session_attrs left out. */
  urlFor(host: HostPort): string;
}

const ACCEPTED: readonly string[] = ['any', 'read-write', 'primary'];

/** The authority of a URL-style connection string: scheme, credentials, host list, rest. */
const AUTHORITY = /^([a-z][a-z0-9+.-]*:\/\/)((?:[^@/?#]*@)?)([^/?#]*)(.*)$/is;

/**
 * The host list of a connection string that names more than one host, or undefined for one host
 * (left to node-postgres as it is). Throws a plain Error naming the problem (never the URL, which
 * may hold a password) for a list it cannot use: an empty entry, a bad port, a socket path, or a
 * target_session_attrs other than any, read-write or primary.
 */
export function parseHostList(connectionString: string): HostList | undefined {
  const match = AUTHORITY.exec(connectionString);
  if (!match) return undefined;
  const [, scheme, credentials, authority, rest] = match as unknown as [string, string, string, string, string];
  if (!authority.includes(',')) return undefined;
  const hosts = authority.split(',').map(parseHostPort);
  const { query, attrs } = withoutTargetSessionAttrs(rest);
  return {
    hosts,
    targetSessionAttrs: attrs,
    urlFor: (host) => `${scheme}${credentials}${formatHost(host)}${query}`,
  };
}

function parseHostPort(entry: string): HostPort {
  const bracketed = /^\[([^\]]+)\](?::(.*))?$/.exec(entry);
  const [host, port] = bracketed ? [bracketed[1]!, bracketed[2]] : splitPort(entry);
  if (host === '') throw new Error('an empty host in the host list');
  if (decodeURIComponent(host).startsWith('/')) throw new Error('a socket directory in a host list');
  if (port !== undefined && !/^\d{1,5}$/.test(port)) throw new Error('a port in the host list is not a number');
  const number = port === undefined ? 5432 : Number(port);
  if (number < 1 || number > 65_535) throw new Error('a port in the host list is out of range');
  return { host: bracketed ? host : decodeURIComponent(host), port: number };
}

function splitPort(entry: string): [string, string | undefined] {
  const colon = entry.lastIndexOf(':');
  return colon === -1 ? [entry, undefined] : [entry.slice(0, colon), entry.slice(colon + 1)];
}

function formatHost({ host, port }: HostPort): string {
  return `${host.includes(':') ? `[${host}]` : encodeURIComponent(host)}:${port}`;
}

/** The path and query without target_session_attrs (node-postgres would not know it), and its value. */
function withoutTargetSessionAttrs(rest: string): { query: string; attrs: TargetSessionAttrs } {
  const at = rest.indexOf('?');
  if (at === -1) return { query: rest, attrs: 'any' };
  const params = new URLSearchParams(rest.slice(at + 1));
  const attrs = params.get('target_session_attrs') ?? 'any';
  if (!ACCEPTED.includes(attrs))
    throw new Error('target_session_attrs must be any, read-write or primary (converge writes)');
  params.delete('target_session_attrs');
  const query = params.toString();
  return { query: `${rest.slice(0, at)}${query ? `?${query}` : ''}`, attrs: attrs as TargetSessionAttrs };
}

/** The statement that tells whether a session is what `attrs` asks for: true when it is. */
export function sessionCheck(attrs: TargetSessionAttrs): string | undefined {
  if (attrs === 'read-write') return "SELECT current_setting('transaction_read_only') = 'off' AS ok";
  if (attrs === 'primary') return 'SELECT NOT pg_is_in_recovery() AS ok';
  return undefined;
}
