/**
 * autocannon, typed: it ships no types; this is the part of its API the benches use.
 */
import { createRequire } from 'node:module';

/**
 * One request autocannon sends over and over. `Context` is the per-connection object that
 * `setupRequest` may write and `onResponse` read.
 */
export interface AutocannonRequest<Context extends object = object> {
  method: string;
  path: string;
  headers?: Record<string, string>;
  body?: string;
  setupRequest?: (req: AutocannonRequest<Context>, context: Context) => AutocannonRequest<Context>;
  onResponse?: (status: number, body: string, context: Context) => void;
}

interface Histogram {
  average: number;
  mean: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
}

export interface AutocannonResult {
  duration: number;
  latency: Histogram;
  requests: Histogram & { total: number };
  errors: number;
  timeouts: number;
  non2xx: number;
  '2xx': number;
  statusCodeStats: Record<string, { count: number }>;
}

type Autocannon = <Context extends object>(options: {
  url: string;
  connections: number;
  duration: number;
  pipelining?: number;
  requests: AutocannonRequest<Context>[];
}) => Promise<AutocannonResult>;

export const autocannon = createRequire(import.meta.url)('autocannon') as Autocannon;
