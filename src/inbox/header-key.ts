import type pg from 'pg';
import { poolTarget, schemaReadFailure } from '../db/pool.js';
import { SchemaNotMigratedError } from '../runtime/errors.js';
import type { SchemaRef } from '../runtime/identifier.js';
import { inboxSql } from './sql.js';

/**
 * The schema's header key (migration 18), read once per process: converge signs the headers it
 * writes with it and honours only headers that carry its signature. A failed read is not kept,
 * so the next call tries again; a role without the grant is a misconfiguration, named as one.
 */
export class HeaderKey {
  #key: Buffer | undefined;
  #loading: Promise<Buffer> | undefined;

  constructor(
    private readonly pool: pg.Pool,
    private readonly schema: SchemaRef,
  ) {}

  /** The key once read, else null (nothing is trusted, and copies go unsigned, until it is). */
  get loaded(): Buffer | null {
    return this.#key ?? null;
  }

  get(): Promise<Buffer> {
    if (this.#key) return Promise.resolve(this.#key);
    this.#loading ??= this.#read().then(
      (key) => (this.#key = key),
      (err: unknown) => {
        this.#loading = undefined;
        throw err;
      },
    );
    return this.#loading;
  }

  async #read(): Promise<Buffer> {
    const target = poolTarget(this.pool);
    try {
      const { rows } = await this.pool.query<{ key: Buffer }>(inboxSql(this.schema).headerKey);
      const key = rows[0]?.key;
      if (!key) throw new SchemaNotMigratedError(this.schema.name, target.endpoint, null, 18);
      return key;
    } catch (err) {
      throw schemaReadFailure(err, target, {
        reason: `the role may not read "${this.schema.name}".header_key (added by migration 18)`,
        hint: 'run the statements `converge grants` prints again after upgrading, as the schema owner',
      });
    }
  }
}
