import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { TestContext } from 'node:test';
import { request } from 'undici';

/** A request the scripted upstream received. */
export interface ScriptedRequest {
  method: string;
  /** Path and query, as sent (`/v1/member-api/orders`). */
  path: string;
  body: string;
  /** 1 for the first request of its method and path, 2 for the second … */
  nth: number;
}

/**
 * What the scripted upstream does with one request:
 * - `forward`: passes it to the simulator and answers what the simulator answers;
 * - `forward-unanswered`: passes it on (the simulator acts on it: a create makes its order), then
 *   never answers, so the client times out without knowing;
 * - `unanswered`: neither passes it on nor answers;
 * - an answer: answers it so, without passing it on (a 400 the simulator would not give, a
 *   proxy's 408 or 413, a 5xx).
 */
export type Script =
  | 'forward'
  | 'forward-unanswered'
  | 'unanswered'
  | { status: number; body: unknown; headers?: Record<string, string> };

/**
 * An upstream double for the answer sequences the simulator cannot produce: a real HTTP server on
 * 127.0.0.1 in front of the simulator at `simulatorOrigin`, doing for each request what `script`
 * says (default `forward`). `baseUrl` is the member API's base URL through it; `requests` lists
 * what it received, in order. Connections it leaves unanswered are closed when the test ends.
 */
export async function scriptedUpstream(
  t: Pick<TestContext, 'after'>,
  simulatorOrigin: string,
  script: (received: ScriptedRequest) => Script,
): Promise<{ baseUrl: string; requests: ScriptedRequest[] }> {
  const requests: ScriptedRequest[] = [];
  const counts = new Map<string, number>();
  const forward = async (req: IncomingMessage, body: string) => {
    const headers: Record<string, string> = {};
    for (const name of ['x-api-key', 'authorization', 'content-type', 'accept']) {
      const value = req.headers[name];
      if (typeof value === 'string') headers[name] = value;
    }
    const answer = await request(`${simulatorOrigin}${req.url}`, {
      method: req.method as 'GET' | 'POST',
      headers,
      ...(body === '' ? {} : { body }),
    });
    return { status: answer.statusCode, text: await answer.body.text() };
  };
  const handle = async (req: IncomingMessage, res: ServerResponse, body: string) => {
    const key = `${req.method} ${req.url}`;
    const nth = (counts.get(key) ?? 0) + 1;
    counts.set(key, nth);
    const received: ScriptedRequest = { method: req.method ?? '', path: req.url ?? '', body, nth };
    requests.push(received);
    const action = script(received);
    if (action === 'unanswered') return;
    if (action === 'forward' || action === 'forward-unanswered') {
      const answer = await forward(req, body);
      if (action === 'forward-unanswered') return;
      res.writeHead(answer.status, { 'content-type': 'application/json' }).end(answer.text);
      return;
    }
    res
      .writeHead(action.status, { 'content-type': 'application/json', ...action.headers })
      .end(JSON.stringify(action.body));
  };
  const server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => {
      body += chunk;
    });
    req.on('end', () => {
      handle(req, res, body).catch((error: unknown) => res.destroy(error as Error));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  );
  const { port } = server.address() as AddressInfo;
  return { baseUrl: `http://127.0.0.1:${port}/v1/member-api`, requests };
}
