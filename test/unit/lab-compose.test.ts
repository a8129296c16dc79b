/**
 * docker-compose.yml's lab profile, parsed as YAML (there is no Docker engine here to run it): the
 * lab's services are isolated (an internal network, no published ports), the lab connects as
 * ordinary login roles its init script creates (the owner and the three runtime roles), never as
 * the superuser, and RabbitMQ has a lab user instead of guest. The default services (the test suite's) stay outside the profile.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, test } from 'node:test';

import { parse } from 'yaml';

interface Service {
  profiles?: string[];
  image: string;
  ports?: string[];
  networks?: string[];
  environment?: Record<string, string>;
  volumes?: string[];
}
interface Compose {
  services: Record<string, Service>;
  networks?: Record<string, { internal?: boolean; name?: string }>;
}

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const read = (path: string) => readFileSync(join(ROOT, path), 'utf8');
const compose = parse(read('docker-compose.yml')) as Compose;
const lab = Object.entries(compose.services).filter(([, service]) => service.profiles?.includes('lab'));

describe('docker-compose.yml lab profile', () => {
  test('has the lab database, broker and runner, and leaves the default services out of the profile', () => {
    assert.deepEqual(lab.map(([name]) => name).sort(), ['lab', 'lab-postgres', 'lab-rabbitmq']);
    for (const name of ['postgres', 'postgres-logical', 'rabbitmq'])
      assert.equal(compose.services[name]?.profiles, undefined, `${name} starts without a profile`);
  });

  test('is isolated: only on an internal network, nothing published', () => {
    for (const [name, service] of lab) {
      assert.equal(service.ports, undefined, `${name} publishes no port`);
      assert.deepEqual(service.networks, ['lab'], `${name} is only on the lab network`);
    }
    assert.equal(compose.networks?.lab?.internal, true);
  });

  test('connects as the ordinary role its init script creates, and to RabbitMQ as the lab user, never guest', () => {
    const runner = compose.services.lab!.environment!;
    const database = new URL(runner.DATABASE_URL!);
    const broker = new URL(runner.AMQP_URL!);
    assert.equal(database.username, 'converge_lab');
    assert.equal(database.hostname, 'lab-postgres');
    const init = read('lab/compose/postgres-init.sql');
    assert.match(init, new RegExp(`CREATE ROLE converge_lab LOGIN PASSWORD '${database.password}' NOSUPERUSER`));
    // The runtime roles lab/harness.ts grants with `converge grants`: ordinary login roles of their own.
    for (const part of ['RELAY', 'CONSUMER', 'PRODUCER']) {
      const url = new URL(runner[`LAB_${part}_URL`]!);
      assert.equal(url.username, `converge_lab_${part.toLowerCase()}`);
      assert.equal(url.hostname, 'lab-postgres');
      assert.match(init, new RegExp(`CREATE ROLE ${url.username} LOGIN PASSWORD '${url.password}' NOSUPERUSER`));
    }
    assert.ok(compose.services['lab-postgres']!.volumes!.some((v) => v.startsWith('./lab/compose/postgres-init.sql:')));
    const rabbit = compose.services['lab-rabbitmq']!.environment!;
    assert.notEqual(rabbit.RABBITMQ_DEFAULT_USER, 'guest');
    assert.equal(broker.username, rabbit.RABBITMQ_DEFAULT_USER);
    assert.equal(broker.password, rabbit.RABBITMQ_DEFAULT_PASS);
    assert.equal(broker.hostname, 'lab-rabbitmq');
  });
});
