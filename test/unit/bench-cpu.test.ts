/** bench/cpu.ts: reading CPU time of process trees from /proc. */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { cpuPerEvent, parseStat, readCpu, treeSeconds } from '../../bench/cpu.js';

// Fields 14-17 (utime stime cutime cstime) are 10 20 30 40 ticks here.
const stat = (pid: number, comm: string, ppid: number, ticks: [number, number, number, number]) =>
  `${pid} (${comm}) S ${ppid} 1 1 0 -1 4194560 100 0 0 0 ${ticks.join(' ')} 20 0 1 0 100 1000 10`;

const cpuMs = (u: NodeJS.CpuUsage) => (u.user + u.system) / 1000;

describe('bench cpu', () => {
  test('a stat line: the command may hold spaces and parentheses; all four time fields count', () => {
    const parsed = parseStat(stat(42, 'postgres: walwriter (x) ', 7, [10, 20, 30, 40]));
    assert.deepEqual(parsed, { pid: 42, ppid: 7, comm: 'postgres: walwriter (x) ', ticks: 100 });
  });

  test('a tree counts its root and every descendant once, and nothing outside it', () => {
    const processes = [
      parseStat(stat(1, 'init', 0, [1, 0, 0, 0]))!,
      parseStat(stat(10, 'postgres', 1, [100, 0, 50, 0]))!,
      parseStat(stat(11, 'postgres', 10, [20, 5, 0, 0]))!,
      parseStat(stat(12, 'postgres', 11, [0, 0, 0, 5]))!,
      parseStat(stat(20, 'beam.smp', 1, [300, 0, 0, 0]))!,
    ];
    const perTick = treeSeconds([processes[0]!], [1]);
    assert.equal(Math.round(treeSeconds(processes, [10]) / perTick), 180);
    assert.equal(Math.round(treeSeconds(processes, [20, 11]) / perTick), 330);
    assert.equal(treeSeconds(processes, [99]), 0);
  });

  test('CPU this process burns shows up as node time, as much as the kernel counted', () => {
    const before = readCpu(process.pid);
    const used = process.cpuUsage();
    // Spin on CPU time, not wall time: on a loaded machine 300 ms of wall clock may be far less CPU.
    let spin = 0;
    while (cpuMs(process.cpuUsage(used)) < 300) spin++;
    const per = cpuPerEvent(before, readCpu(process.pid), 100);
    const burned = cpuMs(process.cpuUsage(used));
    assert.ok(spin > 0);
    // Ticks are 10 ms and the two readings straddle the loop: a few ticks either way.
    assert.ok(Math.abs(per.node * 100 - burned) <= 40, `node ${per.node * 100} ms, process.cpuUsage ${burned} ms`);
    assert.equal(per.total, per.node + per.postgres + per.rabbitmq);
  });
});
