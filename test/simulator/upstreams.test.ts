import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { createSimulator } from '../../src/simulator/index.js';
import {
  type SimulatedUpstreamOptions,
  startSimulatedUpstreams,
} from '../../src/simulator/simulated-upstreams.js';
import { type DemoFixture, httpRequest, userIdEndingIn } from '../helpers/simulator.js';
import { isValidSignature, startWebhookSink } from '../helpers/webhook-sink.js';

const FIXTURES = fileURLToPath(new URL('../../fixtures/', import.meta.url));
const ALPHA = { key: 'sim_key_demo_M0001', secret: 'sim_secret_demo_M0001' };
const BETA = { key: 'sim_key_beta_B0001', secret: 'sim_secret_beta_B0001' };

/** A fresh copy of a fixture file, every member's webhook_url set to `webhookUrl`. */
function fixture(file: string, webhookUrl = 'http://127.0.0.1:1/webhooks'): DemoFixture {
  const copy = JSON.parse(readFileSync(join(FIXTURES, file), 'utf8')) as DemoFixture;
  for (const member of copy.members) member.webhook_url = webhookUrl;
  return copy;
}

/** alpha (the demo fixture) and beta (fixtures/beta.json), fast, unthrottled, on free ports. */
function alphaAndBeta(webhookBase?: string): SimulatedUpstreamOptions[] {
  const common = { timeScale: 0.001, rateLimit: 0 };
  return [
    {
      name: 'alpha',
      fixture: fixture('demo.json', webhookBase && `${webhookBase}/alpha`) as never,
      ...common,
    },
    { name: 'beta', fixture: fixture('beta.json', webhookBase && `${webhookBase}/beta`) as never, ...common },
  ];
}

const get = (url: string, key: string) => httpRequest(url, { headers: { 'x-api-key': key } });
const order = (baseUrl: string, key: string, ref: string, suffix = '1234') =>
  httpRequest(`${baseUrl}/orders`, {
    headers: { 'x-api-key': key },
    json: {
      product_code: 'MLBB-86',
      partner_ref: ref,
      data: { user_id: userIdEndingIn(suffix), server_id: '2001' },
    },
  });

describe('startSimulatedUpstreams', () => {
  test('each upstream answers on its own base URL with its own catalog, prices and members, and refuses the other one’s key', async (t) => {
    const sims = await startSimulatedUpstreams(alphaAndBeta());
    t.after(() => sims.close());
    const alpha = sims.get('alpha');
    const beta = sims.get('beta');

    assert.deepEqual(
      sims.upstreams.map((u) => u.name),
      ['alpha', 'beta'],
    );
    assert.notEqual(alpha.origin, beta.origin);
    assert.equal(beta.baseUrl, `${beta.origin}/v1/member-api`);

    assert.equal((await get(`${alpha.baseUrl}/profile`, ALPHA.key)).body.member_id, 'M-0001');
    assert.equal((await get(`${beta.baseUrl}/profile`, BETA.key)).body.member_id, 'B-0001');
    assert.equal((await get(`${alpha.baseUrl}/profile`, BETA.key)).body.message, 'INVALID_API_KEY');
    assert.equal((await get(`${beta.baseUrl}/profile`, ALPHA.key)).body.message, 'INVALID_API_KEY');

    const price = async (baseUrl: string, key: string) => {
      const products = (await get(`${baseUrl}/products?category_code=MLBB`, key)).body as {
        code: string;
        price: number;
        id: string;
      }[];
      return products.find((p) => p.code === 'MLBB-86')!;
    };
    const alphaProduct = await price(alpha.baseUrl, ALPHA.key);
    const betaProduct = await price(beta.baseUrl, BETA.key);
    assert.equal(alphaProduct.price, 19_500);
    assert.equal(betaProduct.price, 18_500, 'beta is the cheaper upstream');
    assert.notEqual(alphaProduct.id, betaProduct.id, 'same code, each upstream its own product id');

    assert.throws(() => sims.get('gamma'), /no simulated upstream is named "gamma"/);
  });

  test('each upstream sends its webhooks to its own webhook_url, signed with its own member secret', async (t) => {
    const sink = await startWebhookSink(t, { secrets: [ALPHA.secret, BETA.secret] });
    const sims = await startSimulatedUpstreams(alphaAndBeta(sink.url));
    t.after(() => sims.close());

    assert.equal((await order(sims.get('alpha').baseUrl, ALPHA.key, 'to-alpha')).status, 201);
    assert.equal((await order(sims.get('beta').baseUrl, BETA.key, 'to-beta')).status, 201);
    const [toAlpha] = await sink.waitForDeliveries((d) => d.body?.data?.partner_ref === 'to-alpha');
    const [toBeta] = await sink.waitForDeliveries((d) => d.body?.data?.partner_ref === 'to-beta');

    const signedWith = (d: NonNullable<typeof toAlpha>, secret: string) =>
      isValidSignature(secret, d.timestamp, d.signature, d.rawBody);
    assert.equal(toAlpha!.path, '/webhooks/h2h/alpha');
    assert.ok(signedWith(toAlpha!, ALPHA.secret) && !signedWith(toAlpha!, BETA.secret));
    assert.equal(toBeta!.path, '/webhooks/h2h/beta');
    assert.ok(signedWith(toBeta!, BETA.secret) && !signedWith(toBeta!, ALPHA.secret));
  });

  test('beta goes out of balance: past its 150,000 an order is 400 INSUFFICIENT_BALANCE, while alpha still takes it', async (t) => {
    const sims = await startSimulatedUpstreams(alphaAndBeta());
    t.after(() => sims.close());
    const beta = sims.get('beta').baseUrl;

    // Suffix 0007: the orders stay PENDING (never failed and credited back), so the count is exact.
    for (let i = 0; i < 8; i++) assert.equal((await order(beta, BETA.key, `b-${i}`, '0007')).status, 201);
    const refused = await order(beta, BETA.key, 'b-8', '0007');
    assert.equal(refused.status, 400);
    assert.equal(refused.body.message, 'INSUFFICIENT_BALANCE');
    assert.equal((await get(`${beta}/profile`, BETA.key)).body.member_balance, 150_000 - 8 * 18_500);
    assert.equal((await order(sims.get('alpha').baseUrl, ALPHA.key, 'b-8', '0007')).status, 201);
  });

  test('per-upstream options: each its own faults', async (t) => {
    const [alpha, beta] = alphaAndBeta();
    const sims = await startSimulatedUpstreams([
      alpha!,
      { ...beta!, faults: { nickname_validator_down: true } },
    ]);
    t.after(() => sims.close());

    assert.match((await order(sims.get('alpha').baseUrl, ALPHA.key, 'n-1', '0007')).body.nickname, /^Player/);
    assert.equal((await order(sims.get('beta').baseUrl, BETA.key, 'n-1', '0007')).body.nickname, null);
  });

  test('a bad name, a name given twice, or an upstream that cannot start is refused naming the upstream; the others are closed', async (t) => {
    const [alpha, beta] = alphaAndBeta();
    await assert.rejects(
      startSimulatedUpstreams([{ ...alpha!, name: 'Alpha' }]),
      /\[0\]\.name "Alpha": must be a-z/,
    );
    await assert.rejects(
      startSimulatedUpstreams([alpha!, { ...beta!, name: 'alpha' }]),
      /"alpha" is given twice/,
    );

    const probe = await createSimulator({ fixture: join(FIXTURES, 'demo.json') });
    const port = Number(new URL(probe.origin).port);
    await probe.close();
    const badBeta = fixture('beta.json');
    badBeta.products[0]!.price = -1;
    await assert.rejects(
      startSimulatedUpstreams([
        { ...alpha!, port },
        { ...beta!, fixture: badBeta as never },
      ]),
      /^FixtureError: upstream "beta": fixture is not a valid simulator fixture:\n {2}products\[0\]\.price/,
    );
    const again = await createSimulator({ fixture: join(FIXTURES, 'demo.json'), port });
    t.after(() => again.close());
    assert.equal(again.origin, probe.origin, 'alpha, which had started, was closed');
  });
});
