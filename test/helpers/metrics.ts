import type { Registry } from 'prom-client';

/** The value of the series `name{labels}` in a registry's scrape, or undefined when it has none. */
export async function scraped(
  registry: Registry,
  name: string,
  labels: Record<string, string> = {},
): Promise<number | undefined> {
  const wanted = Object.entries(labels);
  for (const line of (await registry.metrics()).split('\n')) {
    const match = /^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{([^}]*)\})? (\S+)$/.exec(line);
    if (!match || match[1] !== name) continue;
    const own = Object.fromEntries(
      [...(match[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map(([, k, v]) => [k, v]),
    );
    if (wanted.every(([k, v]) => own[k] === v) && Object.keys(own).length === wanted.length) {
      return Number(match[3]);
    }
  }
  return undefined;
}
