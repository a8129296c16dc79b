/**
 * Where the suite's DATABASE_URL leads, for tests that assert a message naming the server or that
 * connect to it as another role: CI runs the integration suite on the installed PostgreSQL and once
 * more on an embedded PostgreSQL 18 on a port of its own, with another database (.ci/run), so no
 * test may write 127.0.0.1:5432 or `test` itself.
 */
import { DATABASE_URL } from '../../kit/services.js';

export interface DatabaseAddress {
  host: string;
  port: number;
  /** `host:port`, as connection errors name the server ("PostgreSQL at 127.0.0.1:5432: …"). */
  where: string;
  /** The database the URL names; as libpq, the user name when it names none. */
  database: string;
}

/** pg's defaults fill the gaps: localhost, 5432, database = user (= postgres). */
export function databaseAddress(url: string = DATABASE_URL): DatabaseAddress {
  const parsed = new URL(url);
  const host = parsed.hostname || 'localhost';
  const port = Number(parsed.port || 5432);
  const user = decodeURIComponent(parsed.username) || 'postgres';
  const database = decodeURIComponent(parsed.pathname.slice(1)) || user;
  return { host, port, where: `${host}:${port}`, database };
}

/** `text` as a regular expression matching exactly it, to build expected messages around a host:port. */
export function literal(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** DATABASE_URL's server and database, logged in as `role` without a password (the servers trust local logins). */
export function urlAs(role: string, url: string = DATABASE_URL): string {
  const parsed = new URL(url);
  const { database } = databaseAddress(url);
  parsed.username = role;
  parsed.password = '';
  parsed.pathname = `/${encodeURIComponent(database)}`;
  return parsed.toString();
}
