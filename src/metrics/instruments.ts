import client from 'prom-client';

/*
 * Every instrument converge makes registers in the registry it is given, never in prom-client's
 * global one: two relays or consumers in one process must not collide on a metric name.
 */

export function counter<L extends string = never>(
  registry: client.Registry,
  name: string,
  help: string,
  labelNames?: readonly L[],
): client.Counter<L> {
  return new client.Counter<L>({ name, help, ...(labelNames ? { labelNames } : {}), registers: [registry] });
}

export function histogram(registry: client.Registry, name: string, help: string, buckets: number[]): client.Histogram {
  return new client.Histogram({ name, help, buckets, registers: [registry] });
}

/** A 0/1 gauge set by events, 0 until the first. */
export function eventGauge(registry: client.Registry, gauge: { name: string; help: string }): client.Gauge {
  const instrument = new client.Gauge({ ...gauge, registers: [registry] });
  instrument.set(0);
  return instrument;
}

/** A gauge read at scrape time: `value` answers for each scrape. */
export function scrapedGauge(
  registry: client.Registry,
  name: string,
  help: string,
  value: () => number | Promise<number>,
): client.Gauge {
  return new client.Gauge({
    name,
    help,
    registers: [registry],
    async collect() {
      this.set(await value());
    },
  });
}
