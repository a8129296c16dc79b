/** What the page's modules share: the last status read, the open quarantine action, the poll pace. */
import type { Action, DashboardData } from './types.js';

export const state: {
  data: DashboardData | null;
  action: { action: Action; id: string } | null;
  pollMs: number;
} = { data: null, action: null, pollMs: 2000 };
