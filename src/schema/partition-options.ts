import { z } from 'zod';

const DAY_MS = 86_400_000;

/** migrate's `partitioned`: keep the outbox and inbox as range partitions by time (docs/operations.md, "Partitioned outbox and inbox"). */
export const partitionedOption = z
  .union([
    z.literal(true).transform(() => ({ intervalMs: DAY_MS, ahead: 3 })),
    z.strictObject({
      intervalMs: z
        .number()
        .int()
        .min(1_000)
        .max(31 * DAY_MS)
        .default(DAY_MS)
        .describe('Time range of one partition, in ms, aligned to the Unix epoch (UTC).'),
      ahead: z.number().int().min(1).max(366).default(3).describe('Partitions kept ready after the current one.'),
    }),
  ])
  .optional()
  .describe(
    'Keep outbox and inbox as range partitions by time, so retention drops whole processed partitions instead of deleting rows. true: one per day, 3 ahead. Converts an existing schema without copying rows; cannot be undone or re-timed.',
  );
