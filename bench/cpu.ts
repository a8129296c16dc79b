/**
 * CPU time the three parties of a pipeline spend in a measured window, read from /proc: the bench
 * with its worker processes (node), the PostgreSQL server and the RabbitMQ node. On a 2-core machine
 * where all three run, a pipeline that keeps the cores busy goes as fast as its CPU time per event
 * allows, so the ratio of two pipelines' CPU per event bounds the ratio of their rates.
 *
 * A process tree's time is its live members' own and reaped children's time (utime + stime + cutime
 * + cstime): a backend or worker that exits inside the window moves its time into its parent's
 * cutime, so it is counted once whether it ended before, during or after the window.
 */
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import type pg from 'pg';

export interface CpuSeconds {
  node: number;
  postgres: number;
  rabbitmq: number;
}

interface ProcStat {
  pid: number;
  ppid: number;
  comm: string;
  ticks: number;
}

const ticksPerSecond = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;

/** /proc/<pid>/stat; the command name is in parentheses and may hold spaces, so fields are read after the last ')'. */
export function parseStat(text: string): ProcStat | null {
  const open = text.indexOf('(');
  const close = text.lastIndexOf(')');
  if (open < 0 || close < open) return null;
  const fields = text.slice(close + 2).split(' ');
  // fields[0] is field 3 (state): utime..cstime are fields 14-17.
  const ticks = [11, 12, 13, 14].reduce((sum, i) => sum + Number(fields[i]), 0);
  return { pid: Number(text.slice(0, open)), ppid: Number(fields[1]), comm: text.slice(open + 1, close), ticks };
}

function readProcesses(): ProcStat[] {
  const stats: ProcStat[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = parseStat(readFileSync(`/proc/${entry}/stat`, 'utf8'));
      if (stat) stats.push(stat);
    } catch {
      // The process ended between readdir and read: its time is in its parent's cutime now.
    }
  }
  return stats;
}

export function treeSeconds(processes: ProcStat[], roots: number[]): number {
  const children = new Map<number, ProcStat[]>();
  for (const p of processes) children.set(p.ppid, [...(children.get(p.ppid) ?? []), p]);
  const byPid = new Map(processes.map((p) => [p.pid, p]));
  let ticks = 0;
  const pending = roots.map((pid) => byPid.get(pid)).filter((p): p is ProcStat => p !== undefined);
  while (pending.length > 0) {
    const p = pending.pop()!;
    ticks += p.ticks;
    pending.push(...(children.get(p.pid) ?? []));
  }
  return ticks / ticksPerSecond;
}

/** The postmaster of the server `pool` talks to (the parent of one of its backends); it must be on this machine. */
export async function postmasterPid(pool: pg.Pool): Promise<number> {
  const { rows } = await pool.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
  const backend = parseStat(readFileSync(`/proc/${rows[0]!.pid}/stat`, 'utf8'));
  if (!backend) throw new Error('cannot read the PostgreSQL backend from /proc');
  return backend.ppid;
}

/** A reading of the three parties' CPU time so far; subtract two readings for a window. */
export function readCpu(postmaster: number): CpuSeconds {
  const processes = readProcesses();
  const beams = processes.filter((p) => p.comm === 'beam.smp').map((p) => p.pid);
  return {
    node: treeSeconds(processes, [process.pid]),
    postgres: treeSeconds(processes, [postmaster]),
    rabbitmq: treeSeconds(processes, beams),
  };
}

/** CPU milliseconds per event in the window between two readings, per party and in all. */
export function cpuPerEvent(before: CpuSeconds, after: CpuSeconds, events: number): CpuSeconds & { total: number } {
  const per = (party: keyof CpuSeconds) => ((after[party] - before[party]) * 1000) / events;
  const node = per('node');
  const postgres = per('postgres');
  const rabbitmq = per('rabbitmq');
  return { node, postgres, rabbitmq, total: node + postgres + rabbitmq };
}
