import { round, type Finding } from './facts.js';

/** One consumer's end-to-end lag (the event's occurredAt to its inbox row) over a window. */
export interface ConsumerLag {
  consumer: string;
  p50Seconds: number;
  p99Seconds: number;
  maxSeconds: number;
  events: number;
}

/** One lag budget against the end-to-end lag of the consumer it names. */
export interface LagBudgetFacts {
  /** The name the budget was given under: a projection named on a watched queue, or an inbox scope. */
  name: string;
  /** The inbox scope whose lag is measured. */
  consumer: string;
  budgetSeconds: number;
  /** p99 of occurredAt → inbox row over the window; null when the consumer recorded nothing in it. */
  p99Seconds: number | null;
  maxSeconds: number | null;
  events: number;
  overBudget: boolean;
}

/**
 * Judges each budget (ms, by projection or consumer) against the lag read per consumer. A
 * projection is found through the watched queue that names it; any other name is an inbox scope.
 * Pure, so the matching and the threshold are unit-tested.
 */
export function judgeLagBudgets(
  budgetsMs: Readonly<Record<string, number>>,
  lag: readonly ConsumerLag[],
  queues: readonly { consumer: string; projection?: string | undefined }[] = [],
): LagBudgetFacts[] {
  return Object.entries(budgetsMs).map(([name, budgetMs]) => {
    const consumer = queues.find((q) => q.projection === name)?.consumer ?? name;
    const measured = lag.find((l) => l.consumer === consumer);
    const budgetSeconds = budgetMs / 1000;
    return {
      name,
      consumer,
      budgetSeconds,
      p99Seconds: measured?.p99Seconds ?? null,
      maxSeconds: measured?.maxSeconds ?? null,
      events: measured?.events ?? 0,
      overBudget: measured !== undefined && measured.p99Seconds > budgetSeconds,
    };
  });
}

/** A warning per budget exceeded: reads that depend on it should go to the source meanwhile. */
export function lagBudgetFindings(budgets: readonly LagBudgetFacts[], windowSeconds: number): Finding[] {
  return budgets
    .filter((b) => b.overBudget)
    .map((b) => ({
      kind: 'lag-over-budget' as const,
      severity: 'warning' as const,
      stage: 'projection' as const,
      subject: b.name,
      evidence: `p99 lag ${round(b.p99Seconds!)} s (max ${round(b.maxSeconds!)} s) over ${b.events} event(s) recorded by ${b.consumer} in the last ${windowSeconds} s; budget ${round(b.budgetSeconds)} s`,
      lookAt:
        "the consumer's queue backlog and completion rate above; meanwhile reads that need fresh data fall back to the source (docs/freshness.md)",
      recovered: 'the p99 lag over the window drops back under the budget',
    }));
}
