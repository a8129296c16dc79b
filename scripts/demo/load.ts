/**
 * The load generator: a few concurrent clients drive the orders API for a while (bounded in time
 * and in requests): they place orders and move known ones on (paid, shipped, cancelled), at times
 * two at once on the same order, so the service's conditional update answers 409 for one of them.
 */
import { setTimeout as delay } from 'node:timers/promises';

export interface LoadResult {
  requests: number;
  placed: number;
  changed: number;
  conflicts: number;
  failed: number;
}

const MOVES: Record<string, string[]> = { placed: ['paid', 'cancelled'], paid: ['shipped', 'cancelled'] };

async function post(url: string, body: unknown): Promise<{ status: number; json: Record<string, unknown> }> {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: response.status, json: (await response.json()) as Record<string, unknown> };
}

export async function runLoad(
  api: string,
  options: { seconds: number; clients?: number; pauseMs?: number; stopped: () => boolean },
): Promise<LoadResult> {
  const result: LoadResult = { requests: 0, placed: 0, changed: 0, conflicts: 0, failed: 0 };
  const clients = options.clients ?? 4;
  const pauseMs = options.pauseMs ?? 50;
  // Bounded twice: by time, and by a request budget that the time would allow at this pace.
  const deadline = Date.now() + options.seconds * 1000;
  const budget = Math.ceil((options.seconds * 1000 * clients) / pauseMs);
  const open = new Map<string, string>(); // order id -> status as this client last saw it

  const step = async (): Promise<void> => {
    result.requests++;
    const known = [...open.keys()];
    if (known.length < 5 || Math.random() < 0.4) {
      const customer = `c-${Math.floor(Math.random() * 20)}`;
      const { status, json } = await post(`${api}/orders`, { customer, amount: 5 + Math.floor(Math.random() * 95) });
      if (status !== 201) return void result.failed++;
      result.placed++;
      open.set(json.id as string, 'placed');
      return;
    }
    const id = known[Math.floor(Math.random() * known.length)]!;
    const moves = MOVES[open.get(id)!]!;
    const to = moves[Math.random() < 0.8 ? 0 : 1]!;
    const { status } = await post(`${api}/orders/${id}/status`, { status: to });
    if (status === 409) result.conflicts++;
    else if (status !== 200) return void result.failed++;
    else result.changed++;
    if (status === 200 && MOVES[to]) open.set(id, to);
    else open.delete(id); // final, or moved on by another client: forget it
  };

  const client = async (): Promise<void> => {
    while (Date.now() < deadline && result.requests < budget && !options.stopped()) {
      await step().catch(() => void result.failed++);
      await delay(pauseMs);
    }
  };
  await Promise.all(Array.from({ length: clients }, client));
  return result;
}
