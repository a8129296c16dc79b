export { repairFromSnapshot } from './repair.js';
export type { TrustedSnapshot, RepairResult } from './repair.js';
