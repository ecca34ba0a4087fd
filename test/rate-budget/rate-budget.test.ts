import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, test } from 'node:test';
import { Redis } from 'ioredis';
import {
  BudgetExhaustedError,
  RateBudget,
  type RateBudgetOptions,
} from '../../src/rate-budget/rate-budget.js';
import { privateRedis } from '../helpers/redis.js';
import { waitFor } from '../helpers/wait.js';

type Context = Parameters<typeof privateRedis>[0];

/** A Redis connection to a private server, closed when the test ends. */
async function redisFor(t: Context, url?: string): Promise<{ redis: Redis; url: string }> {
  const serverUrl = url ?? (await privateRedis(t)).url;
  const redis = new Redis(serverUrl, { maxRetriesPerRequest: 1 });
  t.after(() => redis.disconnect());
  // Ready (its INFO check answered) before a test starts a MONITOR beside it: that INFO seen by a
  // monitor connection still switching into monitor mode is ioredis' "Command queue state error".
  await redis.ping();
  return { redis, url: serverUrl };
}

function budget(redis: Redis, options: Partial<RateBudgetOptions> = {}): RateBudget {
  return new RateBudget({ redis, apiKey: 'sim_key_demo_M0001', ...options });
}

/**
 * When the oldest grant of `shared`'s window leaves it, read once that grant has aged (by a ms
 * or more): less than a whole window then, so an answer of a whole window cannot pass for it.
 */
function grantAged(shared: RateBudget): Promise<number> {
  const window = shared.windowMs + shared.marginMs;
  return waitFor(
    async () => {
      const ms = await shared.oldestGrantLeavesInMs();
      return ms < window ? ms : 0;
    },
    { message: 'the oldest grant to age by a ms' },
  );
}

/** A grant as Redis recorded it: its priority (the member's first letter) and its time on Redis's clock, in ms. */
interface Grant {
  priority: 'c' | 'p' | 'a';
  at: number;
}

/**
 * Every grant of the budget under `key` as its draw script records it (the ZADD of its grant's
 * time, seen through MONITOR), so timed on Redis's clock: the one clock the budget counts by.
 * A grant timed by the test where its acquire resolves includes the test's own scheduling delays,
 * which on a loaded machine can crowd grants of two windows into one.
 */
async function grantLog(t: Context, redis: Redis, key: string) {
  const monitor = await redis.monitor();
  t.after(() => monitor.disconnect());
  const grants: Grant[] = [];
  const markers = new Map<string, () => void>();
  monitor.on('monitor', (_time: string, args: string[]) => {
    const [command = '', target = '', score, member = ''] = args;
    if (command.toUpperCase() === 'ZADD' && target === key) {
      grants.push({ priority: member.slice(0, 1) as Grant['priority'], at: Number(score) });
    } else if (command.toUpperCase() === 'ECHO') {
      markers.get(target)?.();
    }
  });
  return {
    /** The grants so far, in the order Redis made them: every call answered before this one is in. */
    async upToNow(): Promise<Grant[]> {
      const marker = `grant-log-${randomUUID()}`;
      const logged = new Promise<void>((resolve) => markers.set(marker, () => resolve()));
      await redis.echo(marker);
      await logged;
      return [...grants];
    },
  };
}

/** Redis's clock now, in ms, read as the budget's scripts read it. */
async function redisNowMs(redis: Redis): Promise<number> {
  const [seconds, micros] = await redis.time();
  return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
}

/** The largest number of `times` within any interval [t, t + windowMs). */
function busiestWindow(times: number[], windowMs: number): number {
  const sorted = [...times].sort((a, b) => a - b);
  let most = 0;
  for (let i = 0, j = 0; i < sorted.length; i++) {
    while (sorted[i]! - sorted[j]! >= windowMs) j++;
    most = Math.max(most, i - j + 1);
  }
  return most;
}

describe('RateBudget', () => {
  test('concurrent acquirers on several connections never exceed the limit within any rolling window', async (t) => {
    const { redis, url } = await redisFor(t);
    const connections = await Promise.all([1, 2, 3, 4].map(() => redisFor(t, url)));
    const budgets = connections.map(({ redis }) => budget(redis, { limit: 5, windowMs: 400, marginMs: 250 }));
    const { limit, windowMs, marginMs, key } = budgets[0]!;
    const log = await grantLog(t, redis, key);

    await Promise.all(
      Array.from({ length: 24 }, (_, i) =>
        budgets[i % budgets.length]!.acquire('create', { maxWaitMs: 10_000 }),
      ),
    );

    const grants = (await log.upToNow()).map((grant) => grant.at);
    assert.equal(grants.length, 24);
    // A grant counts for windowMs + marginMs on Redis's clock, so no such window, let alone the
    // upstream's 400 ms, holds more than the limit. A fixed window would let 10 through around
    // a boundary; the rolling one spreads 24 grants over ≥ 4 of them.
    const busiest = busiestWindow(grants, windowMs + marginMs);
    assert.ok(busiest <= limit, `busiest ${windowMs + marginMs} ms window had ${busiest} grants`);
  });

  test('the audit draws only idle capacity: never from a window that creation or due polls are using, and never their reserve', async (t) => {
    const { redis } = await redisFor(t);
    // 12 a window: 4 kept for creation, 2 more for due polls; the audit may use the window up to 6.
    const shared = budget(redis, { limit: 12, reservedForCreate: 4, reservedForPolls: 2, windowMs: 60_000 });
    assert.equal(shared.ceilingFor('audit'), 6);

    const idle = [];
    for (let i = 0; i < 8; i++) idle.push(await shared.tryAcquire('audit'));
    const polls = [];
    for (let i = 0; i < 3; i++) polls.push(await shared.tryAcquire('poll'));
    const creates = [];
    for (let i = 0; i < 5; i++) creates.push(await shared.tryAcquire('create'));

    assert.deepEqual(
      idle,
      [true, true, true, true, true, true, false, false],
      'only while the window is idle',
    );
    assert.deepEqual(polls, [true, true, false], 'due polls still find their headroom');
    assert.deepEqual(creates, [true, true, true, true, false], 'and creation its whole reserve');
    const used = await shared.used();
    assert.deepEqual([used.audit, used.poll, used.create, used.auditCeiling], [6, 2, 4, 6]);

    const busy = budget(redis, { limit: 12, reservedForCreate: 4, windowMs: 60_000, keyPrefix: 'busy:' });
    for (let i = 0; i < 6; i++) assert.ok(await busy.tryAcquire('poll'));
    assert.equal(await busy.tryAcquire('audit'), false, 'a window busy with polls has no idle capacity');

    // Polls that were refused come first: the audit waits for them even where the window has room.
    const waiting = budget(redis, { limit: 12, reservedForCreate: 4, windowMs: 60_000, keyPrefix: 'wait:' });
    for (let i = 0; i < 12; i++) assert.ok(await waiting.tryAcquire('create'));
    assert.equal(await waiting.tryAcquire('poll'), false);
    const roomy = budget(redis, { limit: 24, reservedForCreate: 4, windowMs: 60_000, keyPrefix: 'wait:' });
    assert.equal((await roomy.used()).pollsWaiting, true);
    assert.equal(await roomy.tryAcquire('audit'), false, 'no audit read while a poll waits');
    assert.equal(await roomy.tryAcquire('poll'), true, 'the poll itself gets its slot');
  });

  test('a headroom for polls beyond the poll share is refused at construction, naming the bound', async (t) => {
    const { redis } = await redisFor(t);
    assert.throws(() => budget(redis, { limit: 12, reservedForCreate: 4, reservedForPolls: 9 }), {
      name: 'RangeError',
      message:
        /^RateBudget: reservedForPolls must be an integer from 0 to limit - reservedForCreate \(8\), got 9$/,
    });
    assert.equal(budget(redis, { limit: 60 }).ceilingFor('audit'), 30, 'the defaults: 60 - 20 - 10');
  });

  test('polls stop at their share while order creation still gets the reserved part', async (t) => {
    const { redis } = await redisFor(t);
    const shared = budget(redis, { limit: 6, reservedForCreate: 2, windowMs: 60_000 });

    const polls = [];
    for (let i = 0; i < 6; i++) polls.push(await shared.tryAcquire('poll'));
    const creates = [];
    for (let i = 0; i < 3; i++) creates.push(await shared.tryAcquire('create'));

    assert.deepEqual(polls, [true, true, true, true, false, false]);
    assert.deepEqual(creates, [true, true, false]);
    assert.deepEqual(await shared.used(), {
      used: 6,
      create: 2,
      poll: 4,
      audit: 0,
      limit: 6,
      pollCeiling: 4,
      auditCeiling: 3,
      pollFloor: 1,
      pollsWaiting: true,
      windowMs: 61_000,
    });
  });

  test('order creation may use the whole window, after which polls get nothing', async (t) => {
    const { redis } = await redisFor(t);
    const shared = budget(redis, { limit: 3, windowMs: 60_000 });

    for (let i = 0; i < 3; i++) assert.equal(await shared.tryAcquire('create'), true);

    assert.equal(await shared.tryAcquire('poll'), false);
    assert.equal(await shared.tryAcquire('create'), false);
  });

  test('the default budget is 60 per 61 s with 20 reserved for creation', async (t) => {
    const { redis } = await redisFor(t);
    const defaults = budget(redis);

    assert.equal(defaults.limit, 60);
    assert.equal(defaults.ceilingFor('poll'), 40);
    assert.equal(defaults.ceilingFor('create'), 60);
    assert.equal(defaults.pollFloor, 9);
    assert.equal((await defaults.used()).windowMs, 61_000);
  });

  test('without waiting polls creation keeps the whole limit; once a poll is refused it leaves the poll floor to polls', async (t) => {
    const { redis } = await redisFor(t);
    // 6 a window, 2 of them left to polls while polls wait; the window is short so that slots free.
    const shared = budget(redis, {
      limit: 6,
      reservedForCreate: 2,
      pollFloor: 2,
      windowMs: 400,
      marginMs: 150,
    });
    const log = await grantLog(t, redis, shared.key);
    for (let i = 0; i < 6; i++) assert.equal(await shared.tryAcquire('create'), true, `create ${i + 1}`);
    assert.equal((await shared.used()).pollsWaiting, false);
    assert.equal(await shared.tryAcquire('poll'), false, 'the window is full');
    assert.equal((await shared.used()).pollsWaiting, true);

    // A burst of creates waits beside two due polls: as the window frees, creation stops at
    // 6 - 2 and the polls get the rest, instead of waiting for the burst to end.
    const draw = (who: 'create' | 'poll') => shared.acquire(who, { maxWaitMs: 30_000 });
    await Promise.all([...Array.from({ length: 10 }, () => draw('create')), draw('poll'), draw('poll')]);

    const grants = await log.upToNow();
    assert.equal(grants.length, 6 + 12);
    const firstWindow = grants.slice(6, 12).map((grant) => grant.priority);
    assert.equal(
      firstWindow.filter((priority) => priority === 'p').length,
      2,
      `first window after the 6 creates: ${firstWindow.join(', ')}`,
    );
    const busiest = busiestWindow(
      grants.map((grant) => grant.at),
      shared.windowMs + shared.marginMs,
    );
    assert.ok(busiest <= shared.limit, `${busiest} grants in one window`);
  });

  test('the poll floor is lent only once a poll was refused: until then creation’s reserve stays whole', async (t) => {
    const { redis } = await redisFor(t);
    const shared = budget(redis, { limit: 12, reservedForCreate: 4, pollFloor: 3, windowMs: 60_000 });
    for (let i = 0; i < 8; i++) assert.ok(await shared.tryAcquire('create'));

    assert.equal(await shared.tryAcquire('poll'), false, 'at the poll ceiling, no poll has waited yet');
    const waiting = await shared.used();
    assert.deepEqual([waiting.used, waiting.pollsWaiting], [8, true]);
    const polls = [];
    for (let i = 0; i < 4; i++) polls.push(await shared.tryAcquire('poll'));
    assert.deepEqual(polls, [true, true, true, false], 'then the floor of 3, beyond the ceiling');
    assert.equal(await shared.tryAcquire('create'), true, 'creation keeps the rest of its reserve');
    assert.equal((await shared.used()).used, 12);
  });

  test('a poll floor beyond the poll share is refused at construction, naming the bound', async (t) => {
    const { redis } = await redisFor(t);
    assert.throws(() => budget(redis, { limit: 12, reservedForCreate: 4, pollFloor: 9 }), {
      name: 'RangeError',
      message: /^RateBudget: pollFloor must be an integer from 0 to limit - reservedForCreate \(8\), got 9$/,
    });
  });

  test('acquire waits until the oldest grant leaves the window', async (t) => {
    const { redis } = await redisFor(t);
    const shared = budget(redis, { limit: 2, windowMs: 300, marginMs: 0 });
    const log = await grantLog(t, redis, shared.key);
    await shared.acquire('create');
    await shared.acquire('create');

    await shared.acquire('create');

    const [first, , third] = await log.upToNow();
    const waited = third!.at - first!.at;
    assert.ok(waited >= shared.windowMs, `third grant came ${waited} ms after the first`);
  });

  test('a grant counts for its whole window: a draw late in the window is still refused', async (t) => {
    const { redis } = await redisFor(t);
    const shared = budget(redis, { limit: 1, windowMs: 300, marginMs: 100 });
    const log = await grantLog(t, redis, shared.key);
    await shared.acquire('create');
    // Three quarters of the window gone. Waiters sleep until a grant leaves, so only a draw
    // that comes early, as this one, shows a grant let go before its time.
    await waitFor(async () => (await shared.oldestGrantLeavesInMs()) <= 100, {
      message: 'the grant to age by three quarters of its window',
    });

    await shared.tryAcquire('create');

    // Refused; granted only if this process stalled until the first grant had left.
    const grants = (await log.upToNow()).map((grant) => grant.at);
    const busiest = busiestWindow(grants, shared.windowMs + shared.marginMs);
    assert.ok(busiest <= shared.limit, `grants at ${grants.join(', ')}`);
  });

  test('oldestGrantLeavesInMs says when the oldest grant of the window leaves it, and 0 for an empty window', async (t) => {
    const { redis } = await redisFor(t);
    const shared = budget(redis, { limit: 10, windowMs: 1_000, marginMs: 500 });
    assert.equal(await shared.oldestGrantLeavesInMs(), 0);

    const log = await grantLog(t, redis, shared.key);
    await shared.acquire('create');
    const fresh = await shared.oldestGrantLeavesInMs();
    const readBy = await redisNowMs(redis);
    // windowMs + marginMs after the grant, counted on Redis's clock however late the read came.
    const [grant] = await log.upToNow();
    assert.ok(
      fresh <= 1_500 && fresh >= grant!.at + 1_500 - readBy,
      `a grant made ${readBy - grant!.at} ms before the read leaves in ${fresh} ms`,
    );
    // Once the first grant has aged by 300 ms, a new grant does not move the answer: it is the oldest's.
    await waitFor(async () => (await shared.oldestGrantLeavesInMs()) <= 1_200, {
      message: 'the first grant to age by 300 ms',
    });
    await shared.acquire('poll');
    const later = await shared.oldestGrantLeavesInMs();
    assert.ok(later > 0 && later <= 1_200, `after a second grant: ${later} ms`);

    await waitFor(async () => (await shared.used()).used === 0, { message: 'both grants to leave' });
    assert.equal(await shared.oldestGrantLeavesInMs(), 0);
  });

  // It gives up at once, without waiting for a slot that cannot free in time: waiting out its
  // 50 s maxWaitMs first would run into this test's timeout.
  test('acquire gives up at once with BudgetExhaustedError when no slot frees within maxWaitMs', {
    timeout: 20_000,
  }, async (t) => {
    const { redis } = await redisFor(t);
    const shared = budget(redis, { limit: 1, windowMs: 60_000 });
    await shared.acquire('create');
    const before = await grantAged(shared);
    let retryAfterMs = Number.NaN;

    await assert.rejects(shared.acquire('create', { maxWaitMs: 50_000 }), (error: unknown) => {
      assert.ok(error instanceof BudgetExhaustedError);
      assert.equal(error.code, 'BUDGET_EXHAUSTED');
      assert.equal(error.priority, 'create');
      retryAfterMs = error.retryAfterMs;
      return true;
    });

    // The slot frees when the one grant leaves the window, as the budget itself says before and after.
    const after = await shared.oldestGrantLeavesInMs();
    assert.ok(after <= retryAfterMs && retryAfterMs <= before, `${after} ≤ ${retryAfterMs} ≤ ${before}`);
  });

  test('acquire with maxWaitMs 0 throws at once for a spent poll share, with the time until a slot frees', async (t) => {
    const { redis } = await redisFor(t);
    const shared = budget(redis, { limit: 3, reservedForCreate: 1, windowMs: 10_000, marginMs: 0 });
    await shared.acquire('poll');
    await shared.acquire('poll');
    const before = await grantAged(shared);
    let retryAfterMs = Number.NaN;

    await assert.rejects(shared.acquire('poll', { maxWaitMs: 0 }), (error: unknown) => {
      assert.ok(error instanceof BudgetExhaustedError);
      assert.equal(error.priority, 'poll');
      assert.match(error.message, /end this polling pass/);
      retryAfterMs = error.retryAfterMs;
      return true;
    });

    // The poll share frees when the older of its two grants leaves the window.
    const after = await shared.oldestGrantLeavesInMs();
    assert.ok(after <= retryAfterMs && retryAfterMs <= before, `${after} ≤ ${retryAfterMs} ≤ ${before}`);
  });

  test('an aborted wait rejects with the abort reason', async (t) => {
    const { redis } = await redisFor(t);
    const shared = budget(redis, { limit: 1, windowMs: 60_000 });
    await shared.acquire('create');
    const controller = new AbortController();

    const waiting = shared.acquire('create', { signal: controller.signal });
    controller.abort(new Error('shutting down'));

    await assert.rejects(waiting, /shutting down/);
  });

  test('the Redis key is a hash of the API key, and each API key has its own budget', async (t) => {
    const { redis } = await redisFor(t);
    const first = budget(redis, { apiKey: 'sim_key_demo_M0001', limit: 1, windowMs: 60_000 });
    const second = budget(redis, { apiKey: 'sim_key_other_M0006', limit: 1, windowMs: 60_000 });

    assert.equal(await first.tryAcquire('create'), true);
    assert.equal(await second.tryAcquire('create'), true);
    assert.equal(await first.tryAcquire('create'), false);

    const keys = (await redis.keys('*')).sort();
    assert.deepEqual(keys, [first.key, second.key].sort());
    assert.match(first.key, /^h2h:rate-budget:[0-9a-f]{32}$/);
    for (const key of keys) assert.ok(!key.includes('sim_key'), `${key} shows the API key`);
  });

  test('grants leave Redis when the window has passed (the key expires)', async (t) => {
    const { redis } = await redisFor(t);
    const shared = budget(redis, { limit: 2, windowMs: 100, marginMs: 0 });
    await shared.acquire('create');

    const ttl = await redis.pttl(shared.key);

    assert.ok(ttl > 0 && ttl <= 100, `pttl ${ttl}`);
  });

  test('the budget keeps working after Redis forgets its scripts', async (t) => {
    const { redis } = await redisFor(t);
    const shared = budget(redis, { limit: 5, windowMs: 60_000 });
    await shared.acquire('create');

    await redis.script('FLUSH');

    assert.equal(await shared.tryAcquire('create'), true);
    assert.equal((await shared.used()).used, 2);
  });

  test('wrong options throw at construction', async (t) => {
    const { redis } = await redisFor(t);

    assert.throws(() => budget(redis, { limit: 0 }), /limit must be a positive integer/);
    assert.throws(() => budget(redis, { windowMs: 1.5 }), /windowMs must be a positive integer/);
    assert.throws(() => budget(redis, { marginMs: -1 }), /marginMs/);
    assert.throws(() => budget(redis, { limit: 10, reservedForCreate: 10 }), /reservedForCreate/);
    assert.throws(() => budget(redis, { apiKey: '' }), /apiKey is required/);
  });
});
