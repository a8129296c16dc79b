import { z } from 'zod';
import { parseHostList } from '../../runtime/host-list.js';

import {
  amqpUrlRequired,
  brokerRequired,
  brokerUrls,
  connectionRequired,
  defineOptions,
  faultHooksOption,
  hookOption,
  identifierOption,
  requireConnection,
  type OptionsInput,
  type OptionsOutput,
} from '../../runtime/options.js';

import { publisherShape } from '../options.js';

/** Slot and publication a CDC relay uses unless told otherwise. */
export const DEFAULT_CDC_SLOT = 'converge_cdc';

export const cdcRelayOptions = defineOptions(
  'CdcRelay',
  z
    .strictObject({
      ...publisherShape,
      slot: identifierOption
        .default(DEFAULT_CDC_SLOT)
        .describe('Logical replication slot (pgoutput) the relay reads; one relay at a time may use it.'),
      publication: identifierOption
        .default(DEFAULT_CDC_SLOT)
        .describe("Publication of the outbox table's inserts the slot is read through."),
      createSlot: z
        .boolean()
        .default(true)
        .describe(
          'Create the publication and slot when missing (needs the REPLICATION attribute or superuser); else they must exist.',
        ),
      failoverSlot: z
        .boolean()
        .default(false)
        .describe(
          'Create the slot with failover = true (PostgreSQL 17+): a standby with sync_replication_slots keeps it, and after a promotion the relay resumes from it there; connectionString may then list the primary and its standbys (target_session_attrs=read-write). An existing slot keeps the flag it was created with.',
        ),
      maxInFlight: z
        .number()
        .int()
        .min(1)
        .max(100_000)
        .default(1_000)
        .describe('Events published and not yet confirmed at most; the replication stream pauses at this bound.'),
      markIntervalMs: z
        .number()
        .int()
        .min(1)
        .default(100)
        .describe(
          'How often confirmed events are marked published and the slot acknowledged, in ms (the mark lags the publish by about this).',
        ),
      statusIntervalMs: z
        .number()
        .int()
        .min(100)
        .default(10_000)
        .describe(
          "Standby status (keepalive) interval towards PostgreSQL, in ms; below the server's wal_sender_timeout.",
        ),
      hooks: faultHooksOption({
        beforeAcknowledge: hookOption<(eventIds: readonly string[]) => void>(
          '(eventIds) => void',
          'When confirmed events are about to be marked published and their position acknowledged (fault injection: throwing or exiting there is a crash in that window).',
        ),
        afterIncompleteMark: hookOption<() => Promise<void>>(
          '() => Promise<void>',
          'After a mark missed rows not yet visible to it, before they are looked at again (fault injection: a commit can become visible in between).',
        ),
      }),
    })
    .refine(requireConnection, connectionRequired())
    .refine(brokerRequired, amqpUrlRequired())
    // The slot lives on one server; only a failover slot (PostgreSQL 17+) is there on a promoted standby too.
    .refine((o) => o.failoverSlot || o.connectionString === undefined || !namesSeveralHosts(o.connectionString), {
      message:
        'a host list needs failoverSlot: true (PostgreSQL 17+): only a failover slot is kept on the standby a failover promotes',
      path: ['connectionString'],
      when: () => true,
    })
    .transform((o) => ({ ...o, amqpUrl: o.amqpUrl === undefined ? undefined : brokerUrls(o.amqpUrl) })),
);

export type CdcRelayOptions = OptionsInput<typeof cdcRelayOptions>;
export type ResolvedCdcRelayOptions = OptionsOutput<typeof cdcRelayOptions>;

export function resolveCdcRelayOptions(input: CdcRelayOptions): ResolvedCdcRelayOptions {
  return cdcRelayOptions.parse(input);
}

/** A host list, usable or not (checkDatabaseUrl gives the reason for an unusable one). */
function namesSeveralHosts(connectionString: string): boolean {
  try {
    return parseHostList(connectionString) !== undefined;
  } catch {
    return true;
  }
}
