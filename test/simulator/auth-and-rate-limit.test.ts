import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { createSimulator } from '../../src/simulator/index.js';
import {
  DEMO_MEMBERS,
  demoFixture,
  fixtureMember,
  httpRequest,
  orderInput,
  startSimulator,
} from '../helpers/simulator.js';
import { waitFor } from '../helpers/wait.js';

const MEMBER_ENDPOINTS: Array<{ method: 'GET' | 'POST'; path: string; json?: unknown }> = [
  { method: 'GET', path: '/profile' },
  { method: 'GET', path: '/categories' },
  { method: 'GET', path: '/products' },
  { method: 'GET', path: '/products?category_code=MLBB' },
  { method: 'POST', path: '/orders', json: orderInput() },
  { method: 'GET', path: '/orders/any-ref' },
];

describe('authentication', () => {
  test('x-api-key authenticates the demo reseller and GET /profile shows its fixture profile', async (t) => {
    const { api, member } = await startSimulator(t);

    const answer = await api('/profile', { auth: 'x-api-key' });

    assert.equal(answer.status, 200);
    assert.deepEqual(answer.body, {
      member_id: member.member_id,
      member_name: member.member_name,
      member_role: member.member_role,
      member_balance: member.balance,
    });
  });

  test('Authorization: Bearer authenticates the same member as x-api-key', async (t) => {
    const { api } = await startSimulator(t);

    const bearer = await api('/profile', { auth: 'bearer' });
    const header = await api('/profile', { auth: 'x-api-key' });

    assert.equal(bearer.status, 200);
    assert.deepEqual(bearer.body, header.body);
  });

  test('each member sees its own profile through its own key', async (t) => {
    const { api, fixture } = await startSimulator(t);
    const second = fixtureMember(fixture, DEMO_MEMBERS.memberRole);

    const answer = await api('/profile', { key: second.api_key });

    assert.equal(answer.status, 200);
    assert.equal(answer.body.member_id, second.member_id);
    assert.equal(answer.body.member_role, 'member');
    assert.equal(answer.body.member_balance, second.balance);
  });

  test('every member endpoint without a key answers 401 API_KEY_MISSING', async (t) => {
    const { api } = await startSimulator(t);

    for (const endpoint of MEMBER_ENDPOINTS) {
      const answer = await api(endpoint.path, { key: null, method: endpoint.method, json: endpoint.json });
      assert.equal(answer.status, 401, `${endpoint.method} ${endpoint.path}`);
      assert.deepEqual(
        answer.body,
        { statusCode: 401, message: 'API_KEY_MISSING', error: 'Unauthorized' },
        `${endpoint.method} ${endpoint.path}`,
      );
    }
  });

  test('an empty Bearer token counts as a missing key', async (t) => {
    const { api } = await startSimulator(t);

    const answer = await api('/profile', { key: null, headers: { authorization: 'Bearer ' } });

    assert.equal(answer.status, 401);
    assert.equal(answer.body.message, 'API_KEY_MISSING');
  });

  test('every member endpoint with a wrong key answers 401 INVALID_API_KEY', async (t) => {
    const { api } = await startSimulator(t);

    for (const endpoint of MEMBER_ENDPOINTS) {
      const answer = await api(endpoint.path, {
        key: 'sim_key_not_issued',
        method: endpoint.method,
        json: endpoint.json,
      });
      assert.equal(answer.status, 401, `${endpoint.method} ${endpoint.path}`);
      assert.deepEqual(
        answer.body,
        { statusCode: 401, message: 'INVALID_API_KEY', error: 'Unauthorized' },
        `${endpoint.method} ${endpoint.path}`,
      );
    }
  });

  test('a member with H2H access off gets 401 INVALID_API_KEY', async (t) => {
    const { api, keyOf } = await startSimulator(t);

    const answer = await api('/profile', { key: keyOf(DEMO_MEMBERS.noH2h) });

    assert.equal(answer.status, 401);
    assert.equal(answer.body.message, 'INVALID_API_KEY');
  });

  test('an inactive member gets 401 INVALID_API_KEY', async (t) => {
    const { api, keyOf } = await startSimulator(t);

    const answer = await api('/profile', { key: keyOf(DEMO_MEMBERS.inactive), auth: 'bearer' });

    assert.equal(answer.status, 401);
    assert.equal(answer.body.message, 'INVALID_API_KEY');
  });

  test('a member whose whitelist lacks the sender gets 401 IP_NOT_WHITELISTED with the sender IP in error', async (t) => {
    const { api, keyOf } = await startSimulator(t);

    for (const endpoint of MEMBER_ENDPOINTS) {
      const answer = await api(endpoint.path, {
        key: keyOf(DEMO_MEMBERS.remote),
        method: endpoint.method,
        json: endpoint.json,
      });
      assert.equal(answer.status, 401, `${endpoint.method} ${endpoint.path}`);
      assert.deepEqual(
        answer.body,
        { statusCode: 401, message: 'IP_NOT_WHITELISTED', error: '127.0.0.1' },
        `${endpoint.method} ${endpoint.path}`,
      );
    }
  });

  test('over IPv6 loopback a member whitelisting ::1 is served and the refused sender IP is ::1', async (t) => {
    const { api, keyOf, sim } = await startSimulator(t, { host: '::1' });

    const served = await api('/profile');
    const refused = await api('/profile', { key: keyOf(DEMO_MEMBERS.remote) });

    assert.match(sim.origin, /^http:\/\/\[::1\]:\d+$/);
    assert.equal(served.status, 200);
    assert.deepEqual(refused.body, { statusCode: 401, message: 'IP_NOT_WHITELISTED', error: '::1' });
  });

  test('a refused key creates no order and debits nothing', async (t) => {
    const { api, keyOf, fixture, patchMember, allOrders } = await startSimulator(t);
    const remote = fixtureMember(fixture, DEMO_MEMBERS.remote);

    const refused = await api('/orders', {
      key: keyOf(DEMO_MEMBERS.remote),
      method: 'POST',
      json: orderInput(),
    });
    await patchMember(remote.member_id, { ip_whitelist: ['127.0.0.1', '::1'] });

    assert.equal(refused.status, 401);
    assert.equal((await allOrders()).length, 0);
    const profile = await api('/profile', { key: remote.api_key });
    assert.equal(profile.body.member_balance, remote.balance);
  });
});

describe('rate limit', () => {
  test('by default the 61st request within a minute answers 429 TOO_MANY_REQUESTS with Retry-After', async (t) => {
    const fixture = demoFixture();
    for (const m of fixture.members) m.webhook_url = 'http://127.0.0.1:1/webhooks';
    const sim = await createSimulator({ fixture: fixture as never, timeScale: 0.001 });
    t.after(() => sim.close());
    const key = fixtureMember(fixture, DEMO_MEMBERS.reseller).api_key;

    const statuses: number[] = [];
    for (let i = 0; i < 60; i++) {
      statuses.push((await httpRequest(`${sim.baseUrl}/profile`, { headers: { 'x-api-key': key } })).status);
    }
    const limited = await httpRequest(`${sim.baseUrl}/categories`, { headers: { 'x-api-key': key } });

    assert.deepEqual(statuses, Array(60).fill(200));
    assert.equal(limited.status, 429);
    assert.deepEqual(limited.body, {
      statusCode: 429,
      message: 'TOO_MANY_REQUESTS',
      error: 'Too Many Requests',
    });
    const retryAfter = Number(limited.headers['retry-after']);
    assert.ok(
      Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= 60,
      `Retry-After ${retryAfter}`,
    );
  });

  test('the limit counts every member endpoint together', async (t) => {
    const { api } = await startSimulator(t, { rateLimit: 5 });

    const answers = [];
    for (const endpoint of MEMBER_ENDPOINTS) {
      answers.push(await api(endpoint.path, { method: endpoint.method, json: endpoint.json }));
    }

    assert.deepEqual(
      answers.map((a) => a.status),
      [200, 200, 200, 200, 201, 429],
    );
    assert.equal(answers[5]!.body.message, 'TOO_MANY_REQUESTS');
  });

  test('the limit is per member: another member is still served when one is limited', async (t) => {
    const { api, keyOf } = await startSimulator(t, { rateLimit: 5 });

    for (let i = 0; i < 5; i++) await api('/profile');
    const limited = await api('/profile');
    const other = await api('/profile', { key: keyOf(DEMO_MEMBERS.memberRole) });

    assert.equal(limited.status, 429);
    assert.equal(other.status, 200);
    assert.equal(other.body.member_id, DEMO_MEMBERS.memberRole);
  });

  test('a limited POST /orders creates no order and debits nothing', async (t) => {
    const { api, member, allOrders } = await startSimulator(t, { rateLimit: 5 });

    for (let i = 0; i < 5; i++) await api('/categories');
    const input = orderInput();
    const limited = await api('/orders', { method: 'POST', json: input });

    assert.equal(limited.status, 429);
    const orders = await allOrders();
    assert.equal(orders.filter((o) => o.member_id === member.member_id).length, 0);
  });

  test('the window rolls: once the oldest counted request leaves the window, requests are served again', async (t) => {
    const { api } = await startSimulator(t, { rateLimit: 3, rateWindowMs: 800 });
    const firstAt = Date.now();
    for (let i = 0; i < 3; i++) assert.equal((await api('/profile')).status, 200);

    const limited = await api('/profile');
    const servedAt = await waitFor(async () => ((await api('/profile')).status === 200 ? Date.now() : 0), {
      intervalMs: 50,
      message: 'a request served again after the window',
    });

    assert.equal(limited.status, 429);
    assert.equal(limited.headers['retry-after'], '1');
    assert.ok(servedAt - firstAt >= 800, `served again ${servedAt - firstAt} ms after the first request`);
  });

  test('rate limit 0 means unlimited: 150 requests in a row are all served', async (t) => {
    const { api } = await startSimulator(t, { rateLimit: 0 });

    const statuses = new Set<number>();
    for (let i = 0; i < 150; i++) statuses.add((await api('/profile')).status);

    assert.deepEqual([...statuses], [200]);
  });
});
