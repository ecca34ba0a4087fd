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
