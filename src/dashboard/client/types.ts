/**
 * The fields of `GET /api/status` and of the quarantine actions that the page reads: its own
 * view of the JSON, declared here because this program is compiled for the browser and cannot
 * import the server's modules (ops/pipeline.ts, ops/dlq.ts, dashboard/history.ts).
 */

export interface Throughput {
  arrivalPerSecond: number | null;
  completionPerSecond: number | null;
  drainSeconds: number | null;
}

export interface Finding {
  kind: string;
  severity: 'stalled' | 'warning';
  stage: string;
  subject?: string;
  evidence: string;
  lookAt: string;
  recovered: string;
}

export interface PipelineStatus {
  checkedAt: string;
  windowSeconds: number;
  stallAfterSeconds: number;
  outbox: { pending: number; failed: number; oldestPendingAgeSeconds: number | null; throughput: Throughput };
  queues: { queue: string; consumer: string; depth: number | null; throughput: Throughput }[];
  gaps: {
    parked: number;
    stuckAggregates: number;
    sample: {
      consumer: string;
      aggregateType: string;
      aggregateId: string;
      currentVersion: number;
      parkedVersions: number[];
    }[];
  };
  lag: { consumer: string; events: number; p50Seconds: number; p99Seconds: number; maxSeconds: number }[];
  findings: Finding[];
  stalled: boolean;
}

export interface HistoryPoint {
  at: number;
  pending: number;
  failed: number;
  lag: Record<string, { p50Seconds: number; p99Seconds: number }>;
}

export interface QuarantineRow {
  id: string;
  consumer: string;
  eventId: string | null;
  reason: string;
  detail: string;
  ageSeconds: number;
  bodyBytes: number;
  resolvedAt: string | null;
  resolution: 'replayed' | 'discarded' | null;
  resolutionNote: string | null;
  replayOutcome: string | null;
}

export interface DashboardData {
  /** Null until the sampler's first sample. */
  status: PipelineStatus | null;
  samplingError: string | null;
  history: HistoryPoint[];
  sampleIntervalMs: number;
  queues: { queue: string; consumer: string }[];
  quarantine: QuarantineRow[];
}

/** `POST /api/quarantine/:id/show`: the message with its sensitive fields masked. */
export interface ShownMessage {
  properties: unknown;
  detail: string;
  bodyBytes: number;
  body: string;
  masking: 'paths' | 'payload' | 'body' | 'none';
  sensitivePaths?: string[];
}

/** `POST /api/quarantine/:id/replay`. */
export interface ReplayResult {
  queue: string;
  omittedHeaders?: string[];
  omittedProperties?: string[];
}

export type Action = 'show' | 'replay' | 'discard';
