import type { SchemaRef } from '../runtime/identifier.js';
import { outboxBlankChecks, outboxEnvelopeChecks } from './outbox-checks.js';
import { mergeOpenQuarantineRepeats, outboxPendingChecks } from './old-rows.js';
import { tableFillfactor } from './table-storage.js';

/**
 * Numbered schema changes, never edited once released; each receives the validated schema (`quoted`).
 * From 19 on, a migration must run on both layouts: `outbox` and `inbox` may be partitioned (partitioning.ts),
 * where a unique index needs the partition key and storage parameters are set per partition
 * (table-storage.ts). `npm run test:partitioned` runs the suite on that layout.
 */
export interface Migration {
  version: number;
  name: string;
  statements: (schema: SchemaRef) => string[];
}

export const migrations: readonly Migration[] = [
  {
    version: 1,
    name: 'outbox, inbox, quarantine and projection state',
    statements: (s) => [
      `CREATE TABLE IF NOT EXISTS ${s.quoted}.outbox (
        position          bigserial PRIMARY KEY,
        event_id          text NOT NULL UNIQUE,
        aggregate_type    text NOT NULL,
        aggregate_id      text NOT NULL,
        aggregate_version bigint NOT NULL CHECK (aggregate_version > 0),
        event_type        text NOT NULL,
        schema_version    integer NOT NULL DEFAULT 1 CHECK (schema_version > 0),
        kind              text NOT NULL DEFAULT 'incremental' CHECK (kind IN ('incremental', 'snapshot')),
        payload           jsonb NOT NULL,
        occurred_at       timestamptz NOT NULL DEFAULT now(),
        traceparent       text,
        tenant_id         text,
        status            text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'published', 'failed')),
        attempts          integer NOT NULL DEFAULT 0,
        next_attempt_at   timestamptz NOT NULL DEFAULT now(),
        claimed_by        text,
        claim_expires_at  timestamptz,
        published_at      timestamptz,
        last_error        text,
        UNIQUE (aggregate_type, aggregate_id, aggregate_version)
      )`,
      // The relay scans only what is still to do, so published history does not slow it down.
      `CREATE INDEX IF NOT EXISTS outbox_pending_idx ON ${s.quoted}.outbox (position) WHERE status = 'pending'`,
      `CREATE INDEX IF NOT EXISTS outbox_unpublished_aggregate_idx
         ON ${s.quoted}.outbox (aggregate_type, aggregate_id, aggregate_version) WHERE status <> 'published'`,
      `CREATE TABLE IF NOT EXISTS ${s.quoted}.inbox (
        consumer          text NOT NULL,
        event_id          text NOT NULL,
        fingerprint       text NOT NULL,
        aggregate_type    text NOT NULL,
        aggregate_id      text NOT NULL,
        aggregate_version bigint NOT NULL,
        event_type        text NOT NULL,
        received_at       timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (consumer, event_id)
      )`,
      `CREATE TABLE IF NOT EXISTS ${s.quoted}.quarantine (
        id             bigserial PRIMARY KEY,
        consumer       text NOT NULL,
        event_id       text,
        reason         text NOT NULL,
        detail         text NOT NULL,
        fingerprint    text,
        exchange       text,
        routing_key    text,
        properties     jsonb NOT NULL,
        body           bytea NOT NULL,
        quarantined_at timestamptz NOT NULL DEFAULT now(),
        resolved_at    timestamptz
      )`,
      `CREATE INDEX IF NOT EXISTS quarantine_open_idx ON ${s.quoted}.quarantine (consumer, quarantined_at) WHERE resolved_at IS NULL`,
      `CREATE TABLE IF NOT EXISTS ${s.quoted}.projection_state (
        projection       text NOT NULL,
        aggregate_type   text NOT NULL,
        aggregate_id     text NOT NULL,
        version          bigint NOT NULL CHECK (version >= 0),
        baseline_version bigint,
        deleted          boolean NOT NULL DEFAULT false,
        updated_at       timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (projection, aggregate_type, aggregate_id)
      )`,
    ],
  },
  {
    version: 2,
    name: 'wake relays with NOTIFY on outbox inserts',
    statements: (s) => [
      // Statement-level, so a batch insert sends one notification; identical notifications
      // in one transaction are folded by PostgreSQL, so the cost is one per transaction.
      `CREATE OR REPLACE FUNCTION ${s.quoted}.notify_outbox_insert() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN
         PERFORM pg_notify('converge_outbox', TG_TABLE_SCHEMA);
         RETURN NULL;
       END $$`,
      `DROP TRIGGER IF EXISTS outbox_notify_insert ON ${s.quoted}.outbox`,
      `CREATE TRIGGER outbox_notify_insert AFTER INSERT ON ${s.quoted}.outbox
         FOR EACH STATEMENT EXECUTE FUNCTION ${s.quoted}.notify_outbox_insert()`,
    ],
  },
  {
    version: 3,
    name: 'storage settings for hot tables',
    statements: (s) => [
      // The relay claims, marks and re-claims the same rows; free space on each page lets those
      // updates stay HOT (claimed_by, claim_expires_at and attempts are not indexed), and early
      // autovacuum/analyze keep the pending-row statistics fresh for the claim's plan.
      `ALTER TABLE ${s.quoted}.outbox SET (fillfactor = 80, autovacuum_vacuum_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.01)`,
      `ALTER TABLE ${s.quoted}.projection_state SET (fillfactor = 80, autovacuum_vacuum_scale_factor = 0.05)`,
      `ALTER TABLE ${s.quoted}.inbox SET (autovacuum_analyze_scale_factor = 0.02)`,
    ],
  },
  {
    version: 4,
    name: 'reorder buffer for incremental events that arrive before their predecessor',
    statements: (s) => [
      // Distinct from the inbox: a parked event is not processed yet. It keeps the raw delivery
      // so that draining it later runs the normal consumer path (inbox, handler, versions).
      `CREATE TABLE IF NOT EXISTS ${s.quoted}.parked (
        consumer          text NOT NULL,
        event_id          text NOT NULL,
        fingerprint       text NOT NULL,
        projection        text NOT NULL,
        aggregate_type    text NOT NULL,
        aggregate_id      text NOT NULL,
        aggregate_version bigint NOT NULL,
        waiting_for       bigint NOT NULL,
        properties        jsonb NOT NULL,
        body              bytea NOT NULL,
        parked_at         timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (consumer, event_id)
      )`,
      `CREATE INDEX IF NOT EXISTS parked_aggregate_idx ON ${s.quoted}.parked (consumer, aggregate_type, aggregate_id, aggregate_version)`,
    ],
  },
  {
    version: 5,
    name: 'byte-ordered index for reconciliation pages',
    statements: (s) => [
      // The reconciler walks projections and sources in the same order, by UTF-8 bytes
      // (COLLATE "C"), whatever the database's default collation; this keeps each page an index range.
      `CREATE INDEX IF NOT EXISTS projection_state_reconcile_idx ON ${s.quoted}.projection_state (projection, aggregate_type, aggregate_id COLLATE "C")`,
    ],
  },
  {
    version: 6,
    name: 'retention: find old inbox rows without a scan',
    statements: (s) => [
      // received_at grows with insertion order, so a BRIN index stays tiny and nearly free to
      // maintain on the consumer's hot path, yet lets cleanup find old rows without a full scan.
      `CREATE INDEX IF NOT EXISTS inbox_received_brin ON ${s.quoted}.inbox USING brin (received_at)`,
    ],
  },
  {
    version: 7,
    name: 'quarantine resolutions',
    statements: (s) => [
      // How a person closed a quarantined message (replayed or discarded) and why; kept, not deleted.
      `ALTER TABLE ${s.quoted}.quarantine
         ADD COLUMN IF NOT EXISTS resolution text CHECK (resolution IN ('replayed', 'discarded')),
         ADD COLUMN IF NOT EXISTS resolution_note text`,
    ],
  },
  {
    version: 8,
    name: 'quarantine: what failed, how often, since when',
    statements: (s) => [
      `ALTER TABLE ${s.quoted}.quarantine
         ADD COLUMN IF NOT EXISTS event_type text,
         ADD COLUMN IF NOT EXISTS schema_version integer,
         ADD COLUMN IF NOT EXISTS failure_class text,
         ADD COLUMN IF NOT EXISTS attempts integer NOT NULL DEFAULT 1,
         ADD COLUMN IF NOT EXISTS times_seen integer NOT NULL DEFAULT 1,
         ADD COLUMN IF NOT EXISTS last_seen_at timestamptz NOT NULL DEFAULT now()`,
      // Added after release: repeats written before this migration made the unique index fail (issue 26).
      // A no-op where there are none, and 8 never ran where there were: no applied schema differs.
      mergeOpenQuarantineRepeats(s),
      // The same message quarantined again while its row is open (a redelivery, a failed
      // replay) updates that row instead of adding one: first seen, last seen, how often.
      `CREATE UNIQUE INDEX IF NOT EXISTS quarantine_open_message_idx ON ${s.quoted}.quarantine (consumer, event_id, fingerprint)
         WHERE resolved_at IS NULL AND event_id IS NOT NULL AND fingerprint IS NOT NULL`,
    ],
  },
  {
    version: 9,
    name: 'operations: end-to-end lag, inbox compaction watermarks, replay outcomes',
    statements: (s) => [
      // When the event happened, next to when the consumer recorded it: status reads lag
      // percentiles from durable rows instead of from one process's memory.
      `ALTER TABLE ${s.quoted}.inbox ADD COLUMN IF NOT EXISTS occurred_at timestamptz`,
      // Per consumer and aggregate: every inbox row at or below this version was compacted away.
      // The projection's version check still refuses those events; this says they were done.
      `CREATE TABLE IF NOT EXISTS ${s.quoted}.inbox_watermark (
        consumer       text NOT NULL,
        aggregate_type text NOT NULL,
        aggregate_id   text NOT NULL,
        version        bigint NOT NULL CHECK (version > 0),
        compacted_at   timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (consumer, aggregate_type, aggregate_id)
      )`,
      // What became of a replayed message once the consumer judged it again.
      `ALTER TABLE ${s.quoted}.quarantine
         ADD COLUMN IF NOT EXISTS replay_outcome text,
         ADD COLUMN IF NOT EXISTS replay_outcome_at timestamptz,
         ADD COLUMN IF NOT EXISTS replay_quarantine_id bigint`,
    ],
  },
  {
    version: 10,
    name: 'quarantine and reorder buffer: exact properties whatever they hold; one open row per invalid message',
    statements: (s) => [
      // The properties as exact JSON text (jsonb cannot hold U+0000, JSON text escapes it), and
      // the hash of body and properties that identifies a message without eventId or fingerprint.
      `ALTER TABLE ${s.quoted}.quarantine
         ADD COLUMN IF NOT EXISTS properties_exact text,
         ADD COLUMN IF NOT EXISTS message_hash text`,
      // Parked deliveries carry the same properties, and must park whatever their headers hold.
      `ALTER TABLE ${s.quoted}.parked ADD COLUMN IF NOT EXISTS properties_exact text`,
      // Identical invalid messages update one open row, as messages with an eventId already do
      // (quarantine_open_message_idx); rows from before this migration have no hash and stay apart.
      `CREATE UNIQUE INDEX IF NOT EXISTS quarantine_open_hash_idx ON ${s.quoted}.quarantine (consumer, message_hash)
         WHERE resolved_at IS NULL AND (event_id IS NULL OR fingerprint IS NULL)`,
    ],
  },
  {
    // 10 belongs to another change merged alongside; the migrator applies whatever is missing, in order.
    version: 11,
    name: 'outbox: check constraints for the envelope rules',
    statements: (s) => [
      // NOT VALID: existing rows are not scanned (no long exclusive lock on a big outbox, and an old
      // bad row cannot fail the upgrade); every new or updated row is checked. The relay still
      // validates each row it claims, so an old pending bad row is marked failed, not published.
      `ALTER TABLE ${s.quoted}.outbox ${outboxEnvelopeChecks()
        .map(([name, check]) => `DROP CONSTRAINT IF EXISTS ${name}, ADD CONSTRAINT ${name} CHECK (${check}) NOT VALID`)
        .join(', ')}`,
    ],
  },
  {
    version: 12,
    name: 'outbox: check constraints against blank ids',
    statements: (s) => [
      // NOT VALID for the same reasons as migration 11; the relay marks an old blank row failed.
      `ALTER TABLE ${s.quoted}.outbox ${outboxBlankChecks()
        .map(([name, check]) => `DROP CONSTRAINT IF EXISTS ${name}, ADD CONSTRAINT ${name} CHECK (${check}) NOT VALID`)
        .join(', ')}`,
    ],
  },
  {
    version: 13,
    name: 'outbox: broker retries apart from attempts',
    statements: (s) => [
      // Nacks and lost confirms are the broker's state, not the event's: counted here, they grow
      // the row's backoff but never spend its maxAttempts (src/relay/failures.ts).
      `ALTER TABLE ${s.quoted}.outbox ADD COLUMN IF NOT EXISTS broker_retries integer NOT NULL DEFAULT 0`,
    ],
  },
  {
    version: 14,
    name: 'remote side effects: one row per idempotency key',
    statements: (s) => [
      // Written before a remote call (pending, attempts + 1) and after it (completed or failed):
      // a pending row is a call whose outcome was never recorded, repeated with the same key.
      // error holds a code or class name only, result what the caller chose to keep (src/effects).
      `CREATE TABLE IF NOT EXISTS ${s.quoted}.effects (
        key             text PRIMARY KEY,
        effect          text NOT NULL,
        event_id        text NOT NULL,
        status          text NOT NULL CHECK (status IN ('pending', 'completed', 'failed')),
        result          jsonb,
        error           text,
        attempts        integer NOT NULL DEFAULT 1,
        first_called_at timestamptz NOT NULL DEFAULT now(),
        last_called_at  timestamptz NOT NULL DEFAULT now(),
        completed_at    timestamptz
      )`,
      // Status reads count the few unfinished keys, never the completed history.
      `CREATE INDEX IF NOT EXISTS effects_open_idx ON ${s.quoted}.effects (status, effect) WHERE status <> 'completed'`,
    ],
  },
  {
    version: 15,
    name: 'schema registry: which event versions each consumer instance reads',
    statements: (s) => [
      // One row per running consumer process (instance), written when it subscribes, refreshed every
      // minute, marked stopped on a graceful stop (src/inbox/registry.ts); `converge compat` reads it.
      // A consumer with no running instance still counts, by its newest row, for the live window.
      `CREATE TABLE IF NOT EXISTS ${s.quoted}.consumer_schemas (
        consumer     text NOT NULL,
        instance     text NOT NULL,
        accepts      text NOT NULL,
        queue        text,
        started_at   timestamptz NOT NULL DEFAULT now(),
        last_seen_at timestamptz NOT NULL DEFAULT now(),
        stopped_at   timestamptz,
        PRIMARY KEY (consumer, instance)
      )`,
    ],
  },
  {
    version: 16,
    name: 'outbox: sensitive payload paths of each event',
    statements: (s) => [
      // Comma-separated paths from the producer's catalog, sent as the x-converge-sensitive header so
      // every display masks them; NULL (rows from before, or no catalog) means "unknown: mask it all".
      `ALTER TABLE ${s.quoted}.outbox ADD COLUMN IF NOT EXISTS sensitive_fields text`,
    ],
  },
  {
    version: 17,
    name: 'outbox: envelope checks bind pending rows, old rows that break them failed, checks validated',
    // Migrations 11 and 12 left old rows unchecked, and one of them failed every claim (issue 26).
    statements: outboxPendingChecks,
  },
  {
    version: 18,
    name: 'authenticated converge headers: a per-schema signing key and a replay token per quarantine row',
    statements: (s) => [
      // A replay sends a fresh random token; its outcome is recorded only on the row whose token matches.
      `ALTER TABLE ${s.quoted}.quarantine ADD COLUMN IF NOT EXISTS replay_token text`,
      // One HMAC key per schema for converge's own headers (attempt, origin, replay), shared by every
      // process; two gen_random_uuid() (PostgreSQL 13+, no extension) give 244 random bits.
      `CREATE TABLE IF NOT EXISTS ${s.quoted}.header_key (
        id         boolean PRIMARY KEY DEFAULT true CHECK (id),
        key        bytea NOT NULL CHECK (length(key) >= 16),
        created_at timestamptz NOT NULL DEFAULT now()
      )`,
      `INSERT INTO ${s.quoted}.header_key (key)
         VALUES (decode(replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', ''), 'hex'))
         ON CONFLICT (id) DO NOTHING`,
    ],
  },
  {
    version: 19,
    name: 'projection_state: room for version updates while the xmin horizon is held',
    statements: (s) => [
      // A held horizon keeps every version of a row; with room on its page the next update stays HOT
      // (no new index entries to walk), docs/performance.md "Vacuum pressure". New pages only.
      `ALTER TABLE ${s.quoted}.projection_state SET (fillfactor = 30)`,
    ],
  },
  {
    version: 20,
    name: 'outbox: room for the claim version of every row while the xmin horizon is held',
    statements: tableFillfactor('outbox', 45),
  },
];

export const LATEST_MIGRATION = migrations[migrations.length - 1]?.version ?? 0;
