import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type RequestListener } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { Agent } from 'undici';
import { postNotification } from '../../src/notify/post-notification.js';

// One POST of a notification to a shop (src/notify/post-notification.ts), against a real HTTP
// server on 127.0.0.1: what the delivery history records of each kind of answer.

async function shop(t: { after: (fn: () => Promise<void>) => void }, listener: RequestListener) {
  const server = createServer(listener);
  let connections = 0;
  server.on('connection', () => {
    connections += 1;
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const agent = new Agent();
  t.after(async () => {
    server.closeAllConnections();
    server.close();
    await agent.close();
  });
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks/h2h?shop=1`;
  return { url, agent, connections: () => connections };
}

const post = (url: string, agent: Agent, timeoutMs = 2_000) =>
  postNotification(url, { 'webhook-id': 'evt_1' }, '{"type":"order.updated"}', {
    timeoutMs,
    dispatcher: agent,
  });

test('a 2xx is delivered with its status, the request carries the body, headers and query, and the connection is reused', async (t) => {
  const seen: Array<{ url?: string; id?: string; type?: string; body: string }> = [];
  const { url, agent, connections } = await shop(t, (req, res) => {
    let body = '';
    req.on('data', (chunk) => {
      body += chunk;
    });
    req.on('end', () => {
      seen.push({
        url: req.url,
        id: req.headers['webhook-id'] as string,
        type: req.headers['content-type'],
        body,
      });
      res.writeHead(204).end();
    });
  });
  for (let i = 0; i < 10; i++) {
    const result = await post(url, agent);
    assert.equal(result.status, 204);
    assert.equal(result.error, null);
  }
  assert.deepEqual(seen[0], {
    url: '/hooks/h2h?shop=1',
    id: 'evt_1',
    type: 'application/json',
    body: '{"type":"order.updated"}',
  });
  // undici may open a second one while the first is handed back; then both are reused.
  assert.ok(connections() <= 2, `${connections()} connections for ten deliveries one after another`);
});

test('any answer counts by its status: a 500, and a 200 after an interim 102 or with a large body', async (t) => {
  let answer: 'fail' | 'interim' | 'large' = 'fail';
  const { url, agent } = await shop(t, (req, res) => {
    req.resume();
    if (answer === 'fail') res.writeHead(500).end('broken');
    else if (answer === 'interim') {
      res.writeProcessing();
      res.writeHead(200).end();
    } else res.writeHead(200).end('x'.repeat(1_000_000));
  });
  assert.deepEqual(await post(url, agent).then(({ status, error }) => ({ status, error })), {
    status: 500,
    error: null,
  });
  answer = 'interim';
  assert.equal((await post(url, agent)).status, 200);
  answer = 'large';
  const large = await post(url, agent);
  assert.equal(large.status, 200, 'a body past 64 KiB is not read: the status stands');
  assert.equal(large.error, null);
});

test('no answer in time, or no server, is an attempt without a status and with the reason', async (t) => {
  const { url, agent } = await shop(t, () => {}); // never answers
  const slow = await post(url, agent, 200);
  assert.equal(slow.status, null);
  assert.match(slow.error ?? '', /no answer within 200 ms \(H2H_NOTIFY_TIMEOUT_MS\)/);
  // Timers run on the loop's cached clock: a little under 200 ms measured is still the time-out.
  assert.ok(slow.durationMs >= 190, `${slow.durationMs} ms`);

  const closed = createServer();
  closed.listen(0, '127.0.0.1');
  await once(closed, 'listening');
  const port = (closed.address() as AddressInfo).port;
  closed.close();
  const refused = await post(`http://127.0.0.1:${port}/`, agent);
  assert.equal(refused.status, null);
  assert.match(refused.error ?? '', /ECONNREFUSED/);

  const invalid = await post('not a url', agent);
  assert.equal(invalid.status, null);
  assert.match(invalid.error ?? '', /Invalid URL/);
});

test('an answer whose body does not finish in time counts by its status', async (t) => {
  const { url, agent } = await shop(t, (req, res) => {
    req.resume();
    res.writeHead(200, { 'content-length': '100' });
    res.write('part of the body'); // and never the rest
  });
  const result = await post(url, agent, 200);
  assert.deepEqual({ status: result.status, error: result.error }, { status: 200, error: null });
  assert.ok(result.durationMs >= 190, `${result.durationMs} ms: it waited for the body until the time-out`);
});
