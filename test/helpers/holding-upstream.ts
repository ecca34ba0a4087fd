import { once } from 'node:events';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { TestContext } from 'node:test';
import { request } from 'undici';

/** A request as the double received it. */
export interface SeenRequest {
  method: string;
  /** The path with its query, as sent. */
  url: string;
  body: string;
}

export interface HoldingUpstream {
  /** The double's base URL: the upstream's, on the double's port. */
  baseUrl: string;
  /** Every request so far, in arrival order (the held one included). */
  readonly requests: readonly SeenRequest[];
  /** Resolves once the request to hold has arrived (and is being held). */
  held: Promise<SeenRequest>;
  /** Forwards the held request; those after it were never held. */
  release(): void;
}

/**
 * An upstream double on 127.0.0.1 in front of `upstreamBaseUrl` (the simulator's): it forwards
 * every request as it came, except the first one `hold` picks, which it keeps, unanswered and
 * not forwarded, until `release()`; the upstream then receives it and its answer goes back.
 * Closed (the held request released first) when the test ends.
 */
export async function startHoldingUpstream(
  t: Pick<TestContext, 'after'>,
  upstreamBaseUrl: string,
  hold: (seen: SeenRequest) => boolean,
): Promise<HoldingUpstream> {
  const upstream = new URL(upstreamBaseUrl);
  const requests: SeenRequest[] = [];
  let holding = false;
  let release!: () => void;
  const released = new Promise<void>((resolve) => {
    release = resolve;
  });
  let heldArrived!: (seen: SeenRequest) => void;
  const held = new Promise<SeenRequest>((resolve) => {
    heldArrived = resolve;
  });

  const readBody = async (req: IncomingMessage) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks).toString('utf8');
  };
  const server = createServer(async (req, res) => {
    const seen: SeenRequest = { method: req.method ?? 'GET', url: req.url ?? '/', body: await readBody(req) };
    requests.push(seen);
    if (!holding && hold(seen)) {
      holding = true;
      heldArrived(seen);
      await released;
    }
    const headers = Object.fromEntries(
      Object.entries(req.headers).filter(
        ([name]) => !['host', 'connection', 'content-length'].includes(name),
      ),
    ) as Record<string, string>;
    try {
      const answer = await request(new URL(seen.url, upstream.origin), {
        method: seen.method as 'GET' | 'POST',
        headers,
        ...(seen.body === '' ? {} : { body: seen.body }),
      });
      const text = await answer.body.text();
      const type = answer.headers['content-type'];
      res.writeHead(answer.statusCode, typeof type === 'string' ? { 'content-type': type } : {});
      res.end(text);
    } catch {
      res.destroy();
    }
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.after(async () => {
    release();
    server.closeAllConnections();
    server.close();
    await once(server, 'close');
  });
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}${upstream.pathname.replace(/\/$/, '')}`,
    requests,
    held,
    release,
  };
}
