import { Gauge, type Registry } from 'prom-client';

/**
 * `read`, shared by the gauges of one scrape: prom-client collects a registry's gauges side by
 * side, so a call while an earlier one is pending gets that one's promise. The gauges then
 * report one answer, and the source (Redis, the store) is asked once a scrape.
 */
export function oneReadPerScrape<T>(read: () => Promise<T>): () => Promise<T> {
  let pending: Promise<T> | undefined;
  return () => {
    if (pending) return pending;
    const current = read();
    pending = current;
    const clear = () => {
      if (pending === current) pending = undefined;
    };
    current.then(clear, clear);
    return current;
  };
}

/** Sets one gauge's series for one row of a scrape's read ({@link scrapedGauges}). */
export type SetSeries<R> = (gauge: Gauge, row: R) => void;

/**
 * A maker of gauges that show the rows of one `read` per scrape (an upstream's budget, an
 * endpoint's backlog): at each scrape every gauge it made drops its series and sets them again,
 * with `set`, from the rows of the one shared read ({@link oneReadPerScrape}), so a row that is
 * gone (an endpoint deleted) leaves no series behind.
 */
export function scrapedGauges<R>(registry: Registry, read: () => Promise<Iterable<R>>) {
  const shared = oneReadPerScrape(read);
  return (name: string, help: string, labelNames: readonly string[], set: SetSeries<R>): Gauge =>
    new Gauge({
      name,
      help,
      labelNames,
      registers: [registry],
      async collect() {
        this.reset();
        for (const row of await shared()) set(this, row);
      },
    });
}
