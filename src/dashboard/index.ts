/** `converge-events/dashboard`: the operator web page over the ops functions, served by node:http. */
export { startDashboard } from './server.js';
export type { Dashboard } from './server.js';
export { dashboardOptions } from './options.js';
export type { DashboardOptions } from './options.js';
export type { HistoryPoint } from './history.js';
