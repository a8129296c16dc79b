/**
 * PgBouncer answers a login the server refused with SQLSTATE 08P01 whatever the reason, keeping
 * only the server's message (1.18: `database "x" does not exist`, `no such user`, `password
 * authentication failed for user "x"`). Read by its code alone that would be a transient protocol
 * failure, retried for ever; these messages give back the server's own code.
 */
export function poolerLoginCode(code: string | undefined, message: string): string | undefined {
  if (code !== '08P01') return code;
  if (/^database "[^"]*" does not exist$|^no such database/.test(message)) return '3D000';
  if (/^no such user$|^role "[^"]*" does not exist$/.test(message)) return '28000';
  if (/^password authentication failed/.test(message)) return '28P01';
  return code;
}
