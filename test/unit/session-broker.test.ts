import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { SessionBroker } from '../../src/inbox/session-broker.js';
import type { TransportConnection, TransportPublisher } from '../../src/transport/transport.js';

function publisher(closed: boolean): TransportPublisher {
  return { closed } as TransportPublisher;
}

function connection(open: () => Promise<TransportPublisher>): TransportConnection & { opened: number } {
  const fake = {
    opened: 0,
    openPublisher: async () => {
      fake.opened++;
      return open();
    },
  };
  return fake as unknown as TransportConnection & { opened: number };
}

describe('SessionBroker.retryChannel', () => {
  it('hands out the open retry channel as it is', async () => {
    const broker = new SessionBroker();
    const open = publisher(false);
    const conn = connection(async () => publisher(false));
    broker.connection = conn;
    broker.retryPublisher = open;
    assert.equal(await broker.retryChannel(), open);
    assert.equal(conn.opened, 0);
  });

  it('opens a new one, once for concurrent callers, when the broker closed it (a refused copy)', async () => {
    const broker = new SessionBroker();
    const fresh = publisher(false);
    const conn = connection(async () => fresh);
    broker.connection = conn;
    broker.retryPublisher = publisher(true);
    const [a, b] = await Promise.all([broker.retryChannel(), broker.retryChannel()]);
    assert.equal(a, fresh);
    assert.equal(b, fresh);
    assert.equal(broker.retryPublisher, fresh);
    assert.equal(conn.opened, 1);
  });

  it('gives none while no channel can be opened, and tries again on the next call', async () => {
    const broker = new SessionBroker();
    let fail = true;
    const fresh = publisher(false);
    const conn = connection(async () => {
      if (fail) throw new Error('connection closed');
      return fresh;
    });
    broker.connection = conn;
    broker.retryPublisher = publisher(true);
    assert.equal(await broker.retryChannel(), undefined);
    fail = false;
    assert.equal(await broker.retryChannel(), fresh);
    assert.equal(conn.opened, 2);
  });
});
