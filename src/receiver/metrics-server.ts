import Fastify, { type FastifyInstance } from 'fastify';
import type { Registry } from 'prom-client';
import { listeningOrigin } from '../shared/listening-origin.js';

/** The metrics port of this process: `base` + pm2's `NODE_APP_INSTANCE` (0 outside pm2); 0 stays 0. */
export function receiverMetricsPort(base: number, env: NodeJS.ProcessEnv = process.env): number {
  if (base === 0) return 0;
  const instance = Number.parseInt(env.NODE_APP_INSTANCE ?? '0', 10);
  return base + (Number.isInteger(instance) && instance > 0 ? instance : 0);
}

/** A listening metrics server. */
export interface ReceiverMetricsServer {
  readonly app: FastifyInstance;
  /** e.g. `http://127.0.0.1:9464/metrics`. */
  readonly url: string;
  close(): Promise<void>;
}

/**
 * Serves `GET /metrics` (Prometheus text) of `registry` on `host:port`, apart from the
 * internet-facing webhook port: the process and queue figures there would tell a forger how
 * their attempts fare. Meant for loopback or a private interface.
 */
export async function startReceiverMetricsServer(
  registry: Registry,
  host: string,
  port: number,
): Promise<ReceiverMetricsServer> {
  const app = Fastify({ logger: false });
  app.get('/metrics', async (_request, reply) => {
    const text = await registry.metrics();
    return reply.type(registry.contentType).send(text);
  });
  await app.listen({ host, port });
  return { app, url: `${listeningOrigin(app.server)}/metrics`, close: () => app.close() };
}
