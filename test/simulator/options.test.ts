import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { createSimulator } from '../../src/simulator/index.js';
import { demoFixture, httpRequest } from '../helpers/simulator.js';
import { waitFor } from '../helpers/wait.js';
import { hangFirst, startWebhookSink } from '../helpers/webhook-sink.js';

const DEMO_PATH = fileURLToPath(new URL('../../fixtures/demo.json', import.meta.url));

describe('createSimulator', () => {
  test('starts from a fixture file path and serves /v1/member-api at baseUrl on 127.0.0.1', async (t) => {
    const sim = await createSimulator({ fixture: DEMO_PATH });
    t.after(() => sim.close());

    const profile = await httpRequest(`${sim.baseUrl}/profile`, {
      headers: { 'x-api-key': 'sim_key_demo_M0001' },
    });

    assert.match(sim.origin, /^http:\/\/127\.0\.0\.1:\d+$/);
    assert.equal(sim.baseUrl, `${sim.origin}/v1/member-api`);
    assert.equal(profile.status, 200);
    assert.equal(profile.body.member_id, 'M-0001');
  });

  test('a bad option is refused at start with an error naming it', async () => {
    const cases: Array<[Record<string, unknown>, RegExp]> = [
      [{ timeScale: -1 }, /timeScale/],
      [{ rateLimit: 1.5 }, /rateLimit/],
      [{ port: 70_000 }, /port/],
      [{ webhookTimeoutMs: 0 }, /webhookTimeoutMs/],
      [{ faults: { webhook_drop: 2 } }, /faults\.webhook_drop: must be between 0 and 1/],
      [{ faults: { bogus: 1 } }, /faults/],
    ];
    for (const [option, name] of cases) {
      await assert.rejects(createSimulator({ fixture: demoFixture() as never, ...option }), name);
    }
  });

  test('faults: on from the start, and POST /__sim/reset comes back to them, not to none', async (t) => {
    const sim = await createSimulator({
      fixture: DEMO_PATH,
      faults: { nickname_validator_down: true, webhook_duplicate: 0.5 },
    });
    t.after(() => sim.close());
    const faults = () => httpRequest(`${sim.origin}/__sim/faults`);

    const atStart = (await faults()).body;
    assert.equal(atStart.nickname_validator_down, true);
    assert.equal(atStart.webhook_duplicate, 0.5);
    assert.equal(atStart.error_5xx, 0);
    await httpRequest(`${sim.origin}/__sim/faults`, {
      json: { nickname_validator_down: false, error_5xx: 1 },
    });
    await httpRequest(`${sim.origin}/__sim/reset`, { method: 'POST' });
    assert.deepEqual((await faults()).body, atStart);
  });

  test('a fixture that does not validate is refused with an error naming the field', async () => {
    const fixture = demoFixture();
    fixture.products[0]!.category_code = 'NOPE';
    fixture.members[1]!.ip_whitelist = ['not-an-ip'];

    await assert.rejects(createSimulator({ fixture: fixture as never }), (error: Error) => {
      assert.match(error.message, /products\[0\]\.category_code/);
      assert.match(error.message, /members\[1\]\.ip_whitelist/);
      return true;
    });
  });

  test('a missing fixture file is refused with an error naming the path', async () => {
    await assert.rejects(
      createSimulator({ fixture: '/nonexistent/fixture.json' }),
      /\/nonexistent\/fixture\.json/,
    );
  });

  test('close() stops listening and may be called twice', async () => {
    const sim = await createSimulator({ fixture: demoFixture() as never });

    await sim.close();
    await sim.close();

    await assert.rejects(httpRequest(`${sim.baseUrl}/profile`), /ECONNREFUSED/);
  });

  test('close() returns while a webhook delivery is waiting for an answer, and drops that delivery', {
    timeout: 30_000,
  }, async (t) => {
    const sink = await startWebhookSink(t, { secrets: ['sim_secret_demo_M0001'], answer: hangFirst(1) });
    const fixture = demoFixture();
    fixture.members[0]!.webhook_url = sink.url;
    // The delivery would wait 10 minutes for its answer: a close that waited for it would run
    // into this test's timeout.
    const sim = await createSimulator({
      fixture: fixture as never,
      timeScale: 0.001,
      webhookTimeoutMs: 600_000,
    });
    await httpRequest(`${sim.baseUrl}/orders`, {
      headers: { 'x-api-key': 'sim_key_demo_M0001' },
      json: {
        product_code: 'MLBB-86',
        partner_ref: 'hang-1',
        data: { user_id: '12344321', server_id: '2001' },
      },
    });
    await sink.waitForDeliveries(() => true);
    assert.equal(sink.openConnections, 1, 'the delivery is waiting for its answer');

    await sim.close();

    await waitFor(() => sink.openConnections === 0, {
      message: 'the simulator closed the delivery connection',
    });
  });
});
