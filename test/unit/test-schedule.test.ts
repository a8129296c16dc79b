import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { test } from 'node:test';
import {
  groupsOf,
  isHeavy,
  longestFirst,
  markerReason,
  nextToStart,
  shareOut,
  type TestFile,
} from '../../scripts/env/test-schedule.js';

const file = (path: string, heavy = false, ...groups: string[]): TestFile => ({
  path,
  groups: heavy ? ['heavy', ...groups] : groups,
});

test('longest first by the previous durations; files never timed start before all of them, heavy ones first', () => {
  const files = [file('a'), file('b'), file('c'), file('d'), file('e'), file('f', true), file('g', true)];
  const ordered = longestFirst(files, { a: 3, b: 40, d: 12, e: 12, g: 50 });
  assert.deepEqual(
    ordered.map((f) => f.path),
    ['f', 'c', 'g', 'b', 'd', 'e', 'a'],
  );
});

test('a heavy file waits while another heavy one runs, and a light one behind it starts instead', () => {
  const waiting = [file('heavy-2', true), file('light'), file('heavy-3', true)];
  assert.equal(nextToStart(waiting, new Set(['heavy'])), 1);
  assert.equal(nextToStart(waiting, new Set()), 0);
  assert.equal(nextToStart([file('heavy-2', true)], new Set(['heavy'])), -1);
  assert.equal(nextToStart([], new Set()), -1);
});

test('a file of a named group waits while another of that group runs; other groups and ungrouped files pass it', () => {
  const waiting = [file('cdc-2', false, 'cdc-server'), file('heavy-1', true), file('plain')];
  assert.equal(nextToStart(waiting, new Set(['cdc-server'])), 1);
  assert.equal(nextToStart(waiting, new Set(['cdc-server', 'heavy'])), 2);
  assert.equal(nextToStart([file('both', true, 'cdc-server')], new Set(['cdc-server'])), -1);
  assert.deepEqual(groupsOf('// test-files: heavy, starts a server\n// test-files: group cdc-server, slots\n'), [
    'heavy',
    'cdc-server',
  ]);
  assert.deepEqual(groupsOf('// test-files: group , nameless\n'), []);
});

test('the heavy marker counts only as a line of its own near the top', () => {
  assert.equal(isHeavy('// test-files: heavy, starts a server\nimport x from "y";\n'), true);
  assert.equal(isHeavy('/** mentions // test-files: heavy inside a comment */\n'), false);
  assert.equal(isHeavy(`${'\n'.repeat(50)}// test-files: heavy\n`), false);
});

test('a marker a run may leave files out by: a line of its own near the top, with its reason', () => {
  const source = '// test-files: heavy, starts a server\n// test-files: session holds LISTEN on one connection\n';
  assert.equal(markerReason(source, 'session'), 'holds LISTEN on one connection');
  assert.equal(markerReason('// test-files: session, asserts on backend pids\n', 'session'), 'asserts on backend pids');
  assert.equal(markerReason('// test-files: session\n', 'session'), '');
  assert.equal(markerReason(source, 'heavy'), 'starts a server');
  assert.equal(markerReason('// test-files: sessions of their own\n', 'session'), undefined, 'another word');
  assert.equal(markerReason('/** // test-files: session in a comment */\n', 'session'), undefined);
  assert.equal(markerReason(`${'\n'.repeat(50)}// test-files: session late\n`, 'session'), undefined);
  assert.deepEqual(groupsOf(source), ['heavy'], 'not a group: files marked session still run beside any other');
});

test('every file marked session says why', () => {
  const dir = new URL('../integration/', import.meta.url);
  for (const name of readdirSync(dir).filter((n) => n.endsWith('.test.ts'))) {
    const reason = markerReason(readFileSync(new URL(name, dir), 'utf8'), 'session');
    if (reason !== undefined) assert.ok(reason.length > 10, `${name}: // test-files: session <reason>`);
  }
});

test('the files that start servers or browsers of their own are marked heavy', () => {
  const dir = new URL('../integration/', import.meta.url);
  const heavy = readdirSync(dir)
    .filter((name) => name.endsWith('.test.ts') && isHeavy(readFileSync(new URL(name, dir), 'utf8')))
    .sort();
  for (const name of ['cdc-relay-marks', 'dashboard', 'embedded-postgres', 'local-env'])
    assert.ok(heavy.includes(`${name}.test.ts`), `${name}.test.ts is marked heavy`);
});

test('every file that uses the logical-replication server is in the cdc-server group', () => {
  const dir = new URL('../integration/', import.meta.url);
  for (const name of readdirSync(dir).filter((n) => n.endsWith('.test.ts'))) {
    const source = readFileSync(new URL(name, dir), 'utf8');
    if (/CDC_DATABASE_URL|withCdcRig/.test(source))
      assert.ok(groupsOf(source).includes('cdc-server'), `${name} is marked // test-files: group cdc-server`);
  }
});

test('shares: longest first onto the least loaded share, untimed files count one second, never an empty share', () => {
  assert.deepEqual(shareOut(['a', 'b', 'c', 'd', 'e'], 2, { a: 12, b: 1, c: 3 }), [['a'], ['c', 'b', 'd', 'e']]);
  assert.deepEqual(shareOut(['a', 'b', 'c', 'd'], 2, {}), [
    ['a', 'c'],
    ['b', 'd'],
  ]);
  assert.deepEqual(shareOut(['a'], 4, {}), [['a']]);
});
