/**
 * Checks on the files a newcomer reads first, so the first-hour defects found in issue 12 cannot
 * come back unnoticed: a README that grows into a manual, a merge-conflict block left in a page,
 * a docker-compose.yml that starts a broker without the plugin the partition tests need, or
 * images other than the versions the docs were measured on.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, test } from 'node:test';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const read = (path: string) => readFileSync(join(ROOT, path), 'utf8');

function markdownFiles(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return markdownFiles(path);
    return entry.name.endsWith('.md') ? [path] : [];
  });
}

describe('repository docs', () => {
  test('the README stays short: at most 250 lines', () => {
    const lines = read('README.md').split('\n').length;
    assert.ok(lines <= 250, `README.md has ${lines} lines; move details into docs/`);
  });

  test('no Markdown page holds a merge-conflict block', () => {
    const pages = [
      'README.md',
      'CONTRIBUTING.md',
      'CHANGELOG.md',
      ...markdownFiles('docs'),
      ...markdownFiles('examples'),
    ];
    const conflicted = pages.filter((page) => /^(<{7}|>{7}) /m.test(read(page)));
    assert.deepEqual(
      conflicted.map((page) => relative(ROOT, join(ROOT, page))),
      [],
    );
  });

  test('docker-compose.yml enables the consistent-hash plugin and uses the versions the docs name', () => {
    const compose = read('docker-compose.yml');
    assert.match(compose, /RABBITMQ_ENABLED_PLUGINS:.*\brabbitmq_consistent_hash_exchange\b/);
    const postgres = /image:\s*postgres:(\d+)/.exec(compose)?.[1];
    const rabbit = /image:\s*rabbitmq:(\d+\.\d+)/.exec(compose)?.[1];
    const measuredOn = read('docs/performance.md');
    assert.ok(postgres && measuredOn.includes(`PostgreSQL ${postgres}`), `postgres:${postgres} not named in docs`);
    assert.ok(rabbit && measuredOn.includes(`RabbitMQ ${rabbit}`), `rabbitmq:${rabbit} not named in docs`);
  });

  test('the package is not published under a name that belongs to someone else', () => {
    // npm's `converge` is an unrelated CRDT package: `npm install converge` installs it, not us.
    const pkg = JSON.parse(read('package.json')) as { name: string; bin: Record<string, string> };
    assert.equal(pkg.name, 'converge-events');
    assert.deepEqual(Object.keys(pkg.bin), ['converge']);
  });
});
