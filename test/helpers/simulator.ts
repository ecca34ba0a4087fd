import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { TestContext } from 'node:test';
import { request } from 'undici';
import { createSimulator, type Simulator, type SimulatorOptions } from '../../src/simulator/index.js';
import type { Order, OrderInput } from '../../src/upstream/model.js';

/**
 * Test harness for the upstream simulator: starts it in-process on 127.0.0.1 (random port) with
 * a fresh copy of `fixtures/demo.json`, closes it when the test ends, and talks to it over real
 * HTTP with undici. Tests of the simulator, the client and the receiver share it.
 */

// ---------------------------------------------------------------------------------------------
// The demo fixture

/** A member of the fixture (docs/simulator.md, "Fixture"). */
export interface FixtureMember {
  member_id: string;
  member_name: string;
  member_role: string;
  balance: number;
  api_key: string;
  api_secret: string;
  h2h_enabled: boolean;
  active: boolean;
  ip_whitelist: string[];
  webhook_url: string;
}

export interface FixtureCategory {
  name: string;
  code: string;
  sub_name: string;
  logo: string;
  is_active: boolean;
}

export interface FixtureProduct {
  id: string;
  code: string;
  name: string;
  category_code: string;
  price: number;
  role_prices: Record<string, number>;
  is_active: boolean;
  api_enabled: boolean;
  target: Record<string, string>;
}

export interface DemoFixture {
  members: FixtureMember[];
  categories: FixtureCategory[];
  products: FixtureProduct[];
  /** Share of ordinary orders that end FAILED (docs/simulator.md, "Several upstreams"); default 0. */
  fail_ratio?: number;
}

const DEMO_FIXTURE_PATH = new URL('../../fixtures/demo.json', import.meta.url);

/** A fresh, mutable copy of `fixtures/demo.json`. */
export function demoFixture(): DemoFixture {
  return JSON.parse(readFileSync(DEMO_FIXTURE_PATH, 'utf8')) as DemoFixture;
}

/** The demo fixture's members by what makes each one special. */
export const DEMO_MEMBERS = {
  /** Reseller role, loopback whitelisted, balance 1,000,000: the default caller. */
  reseller: 'M-0001',
  /** Whitelist without loopback: IP_NOT_WHITELISTED. */
  remote: 'M-0002',
  /** H2H access off: INVALID_API_KEY. */
  noH2h: 'M-0003',
  /** Inactive account: INVALID_API_KEY. */
  inactive: 'M-0004',
  /** Balance 5,000: INSUFFICIENT_BALANCE for every product. */
  lowBalance: 'M-0005',
  /** Role "member": pays the base price. */
  memberRole: 'M-0006',
} as const;

/** Looks a member up in a fixture; throws when it is not there. */
export function fixtureMember(fixture: DemoFixture, memberId: string): FixtureMember {
  const member = fixture.members.find((m) => m.member_id === memberId);
  if (!member) throw new Error(`fixture has no member ${memberId}`);
  return member;
}

/** Looks a product up in a fixture by code; throws when it is not there. */
export function fixtureProduct(fixture: DemoFixture, code: string): FixtureProduct {
  const product = fixture.products.find((p) => p.code === code);
  if (!product) throw new Error(`fixture has no product ${code}`);
  return product;
}

// ---------------------------------------------------------------------------------------------
// Orders

let refCounter = 0;

/** A partner_ref no other test uses: `<prefix>-<counter>-<random>`. */
export function uniqueRef(prefix = 'ref'): string {
  refCounter += 1;
  return `${prefix}-${refCounter}-${randomUUID().slice(0, 8)}`;
}

/**
 * A game user id ending in `suffix`, which picks the simulator's status timeline
 * (docs/simulator.md, "Magic suffixes"): 8 digits, valid for MLBB, FF and PUBGM; `digits: 10`
 * for GI.
 */
export function userIdEndingIn(suffix: string, digits = 8): string {
  return `${'1234567890'.slice(0, digits - suffix.length)}${suffix}`;
}

/**
 * A valid order for MLBB-86 with a unique partner_ref. The default user id ends in 0007, so the
 * order stays PENDING until the control API moves it; pass `data` to pick another timeline.
 */
export function orderInput(overrides: Partial<OrderInput> = {}): OrderInput {
  return {
    product_code: 'MLBB-86',
    partner_ref: uniqueRef('order'),
    data: { user_id: userIdEndingIn('0007'), server_id: '2001' },
    ...overrides,
  };
}

// ---------------------------------------------------------------------------------------------
// HTTP

/**
 * The default type of an answer body: tests assert bodies field by field, and the assertion is
 * the type check.
 */
// biome-ignore lint/suspicious/noExplicitAny: see above; a body the test has not typed yet.
export type AnyBody = any;

/** An HTTP answer with its body read: parsed JSON in `body` (undefined when not JSON). */
export interface HttpAnswer<T = AnyBody> {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: T;
  text: string;
}

export interface HttpOptions {
  method?: 'GET' | 'POST' | 'PATCH' | 'PUT' | 'DELETE';
  /** Sent as JSON (content-type application/json). */
  json?: unknown;
  /** Sent as is; set `headers['content-type']` yourself. */
  rawBody?: string | Buffer;
  headers?: Record<string, string>;
}

/** One request with undici; always reads the whole body so the connection is reused. */
export async function httpRequest<T = AnyBody>(
  url: string,
  options: HttpOptions = {},
): Promise<HttpAnswer<T>> {
  const headers: Record<string, string> = { ...options.headers };
  let body: string | Buffer | undefined = options.rawBody;
  if (options.json !== undefined) {
    body = JSON.stringify(options.json);
    headers['content-type'] ??= 'application/json';
  }
  const res = await request(url, {
    method: options.method ?? (body === undefined ? 'GET' : 'POST'),
    headers,
    body,
    headersTimeout: 15_000,
    bodyTimeout: 15_000,
  });
  const text = await res.body.text();
  let parsed: unknown;
  try {
    parsed = text === '' ? undefined : JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  return { status: res.statusCode, headers: res.headers, body: parsed as T, text };
}

/** An order answer: the order on 2xx, the spec's error body (`statusCode`, `message`, `error`) otherwise. */
export type OrderAnswerBody = Order & { statusCode?: number; error?: string };

/** How the member API helper authenticates. */
export interface ApiOptions extends HttpOptions {
  /** The API key to send; default the demo reseller's. `null` sends none. */
  key?: string | null;
  /** Where the key goes; default `x-api-key`. */
  auth?: 'x-api-key' | 'bearer';
}

// ---------------------------------------------------------------------------------------------
// The harness

export interface TestSimulatorOptions extends Omit<SimulatorOptions, 'fixture'> {
  /** Default: a fresh copy of the demo fixture. */
  fixture?: DemoFixture;
  /**
   * Rewrites every member's `webhook_url` before start. Default: `http://127.0.0.1:1/webhooks`,
   * where nothing listens, so no test posts webhooks to a real service on port 3000.
   */
  webhookUrl?: string;
}

export interface TestSimulator {
  sim: Simulator;
  /** The fixture it was started with (after the `webhookUrl` rewrite). */
  fixture: DemoFixture;
  /** The demo reseller M-0001. */
  member: FixtureMember;
  /** A member API call: `api('/profile')` → `GET <baseUrl>/profile` with the demo key. */
  api<T = AnyBody>(path: string, options?: ApiOptions): Promise<HttpAnswer<T>>;
  /** A control API call: `control('/orders')` → `GET <origin>/__sim/orders`. */
  control<T = AnyBody>(path: string, options?: HttpOptions): Promise<HttpAnswer<T>>;
  /** POST /orders with {@link orderInput} defaults merged with `input`. */
  createOrder(input?: Partial<OrderInput>, options?: ApiOptions): Promise<HttpAnswer<OrderAnswerBody>>;
  /** GET /orders/:ref with the ref URL-encoded. */
  getOrder(ref: string, options?: ApiOptions): Promise<HttpAnswer<OrderAnswerBody>>;
  /** POST /__sim/faults (a partial merge); throws unless it answers 200. */
  setFaults(patch: Record<string, number | boolean | string | string[] | null>): Promise<void>;
  /** PATCH /__sim/members/:member_id; throws unless it answers 200. */
  patchMember(memberId: string, patch: Record<string, unknown>): Promise<void>;
  /**
   * POST /__sim/orders/:ref/status (ref URL-encoded). Returns the answer: 200 with the order, or
   * 409 TRANSITION_NOT_ALLOWED when decisions.md forbids the change.
   */
  setStatus(
    ref: string,
    change: { status: string; serial_number?: string; message?: string },
  ): Promise<HttpAnswer<OrderAnswerBody>>;
  /**
   * GET /__sim/orders: every order of every member, with member_id, product_id, data,
   * callback_url, and create_requests (the POST /orders requests that named its partner_ref).
   */
  allOrders(): Promise<
    Array<
      Order & {
        member_id: string;
        product_id: string;
        data: Record<string, string>;
        callback_url: string | null;
        create_requests: number;
      }
    >
  >;
  /**
   * The POST /orders requests that named each partner_ref of `refs` and found or created its
   * order (0 for a ref the simulator has no order of), from GET /__sim/orders.
   */
  createRequests(refs: readonly string[]): Promise<Record<string, number>>;
  /** `member_balance` from GET /profile; fails when the call does not answer 200. */
  balance(key?: string): Promise<number>;
  /** The API key of a fixture member. */
  keyOf(memberId: string): string;
}

/**
 * Starts a simulator for one test and closes it when the test ends.
 * Defaults here (not the simulator's): `timeScale` 0.001, `rateLimit` 0 (unlimited), so tests
 * are fast and not throttled; a test of the rate limit passes its own.
 */
export async function startSimulator(
  t: Pick<TestContext, 'after'>,
  options: TestSimulatorOptions = {},
): Promise<TestSimulator> {
  const { fixture = demoFixture(), webhookUrl = 'http://127.0.0.1:1/webhooks', ...rest } = options;
  for (const member of fixture.members) member.webhook_url = webhookUrl;
  const sim = await createSimulator({
    timeScale: 0.001,
    rateLimit: 0,
    ...rest,
    fixture: fixture as unknown as SimulatorOptions['fixture'],
  });
  t.after(() => sim.close());
  const member = fixtureMember(fixture, DEMO_MEMBERS.reseller);

  const api: TestSimulator['api'] = (path, { key = member.api_key, auth = 'x-api-key', ...http } = {}) => {
    const headers: Record<string, string> = { ...http.headers };
    if (key !== null) {
      if (auth === 'bearer') headers.authorization = `Bearer ${key}`;
      else headers['x-api-key'] = key;
    }
    return httpRequest(`${sim.baseUrl}${path}`, { ...http, headers });
  };

  const control: TestSimulator['control'] = (path, http) => httpRequest(`${sim.origin}/__sim${path}`, http);
  const expectOk = async (answer: Promise<HttpAnswer>, what: string): Promise<HttpAnswer> => {
    const settled = await answer;
    if (settled.status !== 200) throw new Error(`${what} answered ${settled.status}: ${settled.text}`);
    return settled;
  };

  return {
    sim,
    fixture,
    member,
    api,
    control,
    async setFaults(patch) {
      await expectOk(control('/faults', { method: 'POST', json: patch }), 'POST /__sim/faults');
    },
    async patchMember(memberId, patch) {
      await expectOk(
        control(`/members/${encodeURIComponent(memberId)}`, { method: 'PATCH', json: patch }),
        `PATCH /__sim/members/${memberId}`,
      );
    },
    setStatus: (ref, change) =>
      control<OrderAnswerBody>(`/orders/${encodeURIComponent(ref)}/status`, { method: 'POST', json: change }),
    allOrders: async () => (await expectOk(control('/orders'), 'GET /__sim/orders')).body,
    async createRequests(refs) {
      const orders: Array<{ partner_ref: string; create_requests: number }> = (
        await expectOk(control('/orders'), 'GET /__sim/orders')
      ).body;
      const counts = new Map(orders.map((o) => [o.partner_ref, o.create_requests]));
      return Object.fromEntries(refs.map((ref) => [ref, counts.get(ref) ?? 0]));
    },
    createOrder: (input = {}, opts = {}) =>
      api<OrderAnswerBody>('/orders', { ...opts, method: 'POST', json: orderInput(input) }),
    getOrder: (ref, opts) => api<OrderAnswerBody>(`/orders/${encodeURIComponent(ref)}`, opts),
    async balance(key = member.api_key) {
      const answer = await api('/profile', { key });
      if (answer.status !== 200) throw new Error(`GET /profile answered ${answer.status}: ${answer.text}`);
      return answer.body.member_balance as number;
    },
    keyOf: (memberId) => fixtureMember(fixture, memberId).api_key,
  };
}
