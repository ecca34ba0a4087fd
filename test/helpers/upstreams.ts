import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import { type SimulatedUpstream, startSimulatedUpstreams } from '../../src/simulator/simulated-upstreams.js';
import type { Order } from '../../src/upstream/model.js';
import { type RequestLog, simulatorRequestLog } from './reconciler.js';
import { type DemoFixture, demoFixture, httpRequest, userIdEndingIn } from './simulator.js';
import { waitFor } from './wait.js';

/**
 * Two simulated upstreams, `default` (the demo fixture) and `beta` (fixtures/beta.json), each with
 * its own key and a request log, and the upstreams file and variables that configure h2h-sync
 * with them (docs/upstreams.md). Webhooks go nowhere: an order's news reaches the store only
 * through what a test applies and through polls.
 */
export interface TwoUpstreams {
  default: SimulatedUpstream;
  beta: SimulatedUpstream;
  keys: { default: string; beta: string };
  /** Each simulator's member API requests. */
  logs: { default: RequestLog; beta: RequestLog };
  /** H2H_UPSTREAMS_FILE, H2H_BASE_URL, H2H_API_KEY and beta's key variable. */
  env: Record<string, string>;
  /** POST /orders on that upstream with its key; asserts 201 and returns the order. */
  createOrder(upstream: 'default' | 'beta', partnerRef: string, suffix?: string): Promise<Order>;
  /** The order as that upstream has it, once it has `status` (its control API: no member API request). */
  orderOnceIn(upstream: 'default' | 'beta', partnerRef: string, status: string): Promise<Order>;
}

const BETA_FIXTURE_PATH = new URL('../../fixtures/beta.json', import.meta.url);

/** Starts both simulators (fast, unthrottled) and writes the upstreams file; both end with the test. */
export async function twoSimulatedUpstreams(
  t: Pick<TestContext, 'after'>,
  options: { betaRateLimit?: number } = {},
): Promise<TwoUpstreams> {
  const fixtures = {
    default: demoFixture(),
    beta: JSON.parse(readFileSync(BETA_FIXTURE_PATH, 'utf8')) as DemoFixture,
  };
  for (const fixture of Object.values(fixtures)) {
    for (const member of fixture.members) member.webhook_url = 'http://127.0.0.1:1/webhooks';
  }
  const logs = { default: simulatorRequestLog(), beta: simulatorRequestLog() };
  const sims = await startSimulatedUpstreams(
    (['default', 'beta'] as const).map((name) => ({
      name,
      fixture: fixtures[name] as never,
      timeScale: 0.001,
      rateLimit: 0,
      logger: logs[name].logger,
    })),
  );
  t.after(() => sims.close());
  const keys = { default: fixtures.default.members[0]!.api_key, beta: fixtures.beta.members[0]!.api_key };

  const dir = mkdtempSync(join(tmpdir(), 'h2h-upstreams-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'upstreams.json');
  const beta = sims.get('beta');
  writeFileSync(
    file,
    JSON.stringify({
      upstreams: [
        { name: 'default' },
        {
          name: 'beta',
          base_url: beta.baseUrl,
          ...(options.betaRateLimit === undefined ? {} : { rate_limit: options.betaRateLimit }),
        },
      ],
    }),
  );
  const baseUrlOf = (name: 'default' | 'beta') => sims.get(name).baseUrl;
  return {
    default: sims.get('default'),
    beta,
    keys,
    logs,
    env: {
      H2H_UPSTREAMS_FILE: file,
      H2H_BASE_URL: baseUrlOf('default'),
      H2H_API_KEY: keys.default,
      H2H_UPSTREAM_BETA_API_KEY: keys.beta,
    },
    async createOrder(upstream, partnerRef, suffix = '0003') {
      const answer = await httpRequest<Order>(`${baseUrlOf(upstream)}/orders`, {
        headers: { 'x-api-key': keys[upstream] },
        json: {
          product_code: 'MLBB-86',
          partner_ref: partnerRef,
          data: { user_id: userIdEndingIn(suffix), server_id: '2001' },
        },
      });
      assert.equal(answer.status, 201, answer.text);
      return answer.body;
    },
    orderOnceIn(upstream, partnerRef, status) {
      return waitFor(
        async () => {
          const all = await httpRequest<Order[]>(`${sims.get(upstream).origin}/__sim/orders`);
          return all.body.find((o) => o.partner_ref === partnerRef && o.status === status);
        },
        { message: `${partnerRef} ${status} on ${upstream}` },
      );
    },
  };
}
