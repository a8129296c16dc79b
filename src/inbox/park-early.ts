import { ContentConflictError } from '../runtime/errors.js';
import { describeError, type Logger } from '../runtime/logger.js';
import { traceFields } from './headers.js';
import type { ParkResult } from './parking.js';
import type { ParkRequest, ReorderBuffer } from './reorder-buffer.js';
import type { Settler } from './settle.js';
import type { Settlement } from './types.js';

/** What parking needs: the buffer, the settler for an event that cannot park, and who parks (for a conflict). */
export interface EarlyParkingScope {
  buffer: ReorderBuffer;
  settler: Settler;
  consumer: string;
  logger: Logger;
}

/**
 * Parks an early incremental event (committed before the delivery is acked) and turns the result
 * into its settlement: parked (drained at once if its predecessor applied meanwhile), quarantined
 * when another event with its eventId is parked, retried when the buffer is full or unreachable.
 */
export async function parkEarlyEvent(
  scope: EarlyParkingScope,
  request: ParkRequest,
  attempt: number,
): Promise<Settlement> {
  const { buffer, settler, logger: log } = scope;
  const { delivery, envelope, print } = request;
  const eventId = envelope.eventId;
  let result: ParkResult;
  try {
    result = await buffer.park(request);
  } catch (err) {
    const retry = settler.retryLater(attempt, 'database-unavailable', eventId);
    log.warn(
      { eventId, ...traceFields(delivery, envelope), attempt, delayMs: retry.delayMs, ...describeError(err) },
      'could not park early event; it will be retried',
    );
    return retry;
  }
  if (result.status === 'conflict') {
    const conflict = new ContentConflictError(scope.consumer, eventId, result.parkedFingerprint, print);
    return settler.quarantine({
      delivery,
      eventId,
      print,
      reason: 'content-conflict',
      detail: conflict.message,
      conflict,
    });
  }
  if (result.status === 'full') {
    const retry = settler.retryLater(attempt, 'reorder-buffer-full', eventId);
    log.warn(
      {
        eventId,
        ...traceFields(delivery, envelope),
        aggregateType: envelope.aggregateType,
        aggregateId: envelope.aggregateId,
        limit: result.limit,
        delayMs: retry.delayMs,
      },
      'reorder buffer full; early event waits in the retry queue',
    );
    return retry;
  }
  log.debug(
    {
      eventId,
      aggregateId: envelope.aggregateId,
      version: envelope.aggregateVersion,
      waitingFor: request.waitingFor,
    },
    'early event parked until its predecessor applies',
  );
  await buffer.drainIfCaughtUp(request.projection, envelope);
  return { action: 'ack', outcome: 'parked', eventId };
}
