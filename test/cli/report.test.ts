import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { OrderRoute } from '../../src/domain/attempts.js';
import { withClaims } from '../../src/store/order-store.js';
import type { Order } from '../../src/upstream/model.js';
import { catalogSnapshot } from '../helpers/catalog.js';
import { runCli } from '../helpers/cli.js';
import { publicFormBreaches } from '../helpers/public-json.js';
import { type ManualClock, snapshot, type TestStore } from '../helpers/store.js';
import { describeEachBackend } from '../helpers/store-backends.js';

const DATA = { user_id: '12345678', server_id: '2001' };
const ROUTE: OrderRoute = {
  policy: 'cheapest',
  reason: 'cheapest: price 15000 on default (best of 2 available candidates)',
  next: [{ upstream: 'beta', product_code: 'ML86', price: 15_500, product_name: 'ML 86' }],
};
const PRICE = { default: 15_000, beta: 15_500 } as const;

/** The upstream's snapshot of `ref` now, as that upstream sells it (its price, the catalog's name). */
function said(clock: ManualClock, ref: string, status: string, upstream: keyof typeof PRICE): Order {
  return snapshot(ref, status, {
    amount: PRICE[upstream],
    product_name: 'ML 86',
    created_at: new Date(clock.now()).toISOString(),
  });
}

/** Moves the clock to `iso` (never back). */
function at(clock: ManualClock, iso: string): void {
  const target = Date.parse(iso);
  assert.ok(target >= clock.now(), `the clock only moves on: ${iso}`);
  clock.advance(target - clock.now());
}

/**
 * Two suppliers' orders around the days 2026-11-02 and 2026-11-03 (UTC):
 * - `E0` on default, placed 1 ms before 11-02: SUCCESS;
 * - `A` at 11-02 00:00:00.000: FAILED on default (debited, credited back), then SUCCESS on beta as `A~2`;
 * - `B` on default at 10:00: SUCCESS, REFUNDED the next day;
 * - `C` at 12:00: refused by default (INSUFFICIENT_BALANCE, nothing debited), PENDING on beta as `C~2`;
 * - `D` on beta, placed 1 ms before 11-04: SUCCESS;
 * - `F` on default at 11-04 00:00:00.000: SUCCESS.
 */
async function twoSuppliersDays(store: TestStore, clock: ManualClock): Promise<void> {
  for (const upstream of ['default', 'beta'] as const) {
    await store.catalog.applySync({
      ...catalogSnapshot({ readAt: clock.now(), price: PRICE[upstream], balance: 1_000_000 }),
      upstream,
    });
  }
  const apply = (ref: string, status: string, upstream: keyof typeof PRICE, eventId: string) =>
    store.writer.applyOrderSnapshot(said(clock, ref, status, upstream), {
      source: 'webhook',
      eventId,
      upstream,
    });
  const place = (ref: string, upstream: 'default' | 'beta', route?: OrderRoute) =>
    store.writer.createLocalOrder({
      partnerRef: ref,
      productCode: 'ML86',
      data: DATA,
      upstream,
      ...(route ? { route } : {}),
    });

  // What beta's submission pump does with the attempt queued for it, up to its create call.
  const sendOnBeta = async (ref: string) => {
    const claimed = await withClaims(store, store.claims.settings, 'beta').claims.claimNextQueued();
    assert.equal(claimed?.partnerRef, ref);
    await store.writer.startSubmission(ref, claimed.claim, { leaseMs: 60_000 });
  };

  at(clock, '2026-11-01T23:59:59.999Z');
  await place('E0', 'default');
  await apply('E0', 'SUCCESS', 'default', 'e0');

  at(clock, '2026-11-02T00:00:00.000Z');
  await place('A', 'default', ROUTE);
  await apply('A', 'PENDING', 'default', 'a1');
  clock.advance(60_000);
  const failed = await apply('A', 'FAILED', 'default', 'a2');
  assert.equal(failed.order.partnerRef, 'A~2');
  await sendOnBeta('A~2');
  await apply('A~2', 'SUCCESS', 'beta', 'a3');

  at(clock, '2026-11-02T10:00:00.000Z');
  await place('B', 'default');
  await apply('B', 'SUCCESS', 'default', 'b1');

  at(clock, '2026-11-02T12:00:00.000Z');
  await place('C', 'default', ROUTE);
  const refused = await store.writer.markRejected('C', 'INSUFFICIENT_BALANCE', 'balance too low');
  assert.equal(refused.partnerRef, 'C~2');
  await sendOnBeta('C~2');
  await apply('C~2', 'PENDING', 'beta', 'c1');

  at(clock, '2026-11-03T08:00:00.000Z');
  await apply('B', 'REFUNDED', 'default', 'b2');

  at(clock, '2026-11-03T23:59:59.999Z');
  await place('D', 'beta');
  await apply('D', 'SUCCESS', 'beta', 'd1');

  at(clock, '2026-11-04T00:00:00.000Z');
  await place('F', 'default');
  await apply('F', 'SUCCESS', 'default', 'f1');
}

const counts = (SUCCESS: number, FAILED: number, REFUNDED: number, rejected: number, open: number) => ({
  SUCCESS,
  FAILED,
  REFUNDED,
  rejected,
  open,
});

describeEachBackend('h2h-sync report: the settlement with each supplier', (backend) => {
  test('each supplier is settled for exactly its own attempts, a failed-over order on both, each attempt on the day its order was placed, the range’s edges included and excluded to the millisecond', async (t) => {
    const { store, url, clock } = await backend.tempStore(t);
    await twoSuppliersDays(store, clock);
    const cli = (args: string[]) => runCli(['report', ...args], { H2H_DB_URL: url });

    const json = await cli(['--from', '2026-11-02', '--to', '2026-11-03', '--json']);
    assert.equal(json.code, 0, json.stderr);
    const report = JSON.parse(json.stdout);
    assert.deepEqual(publicFormBreaches(report), []);
    const line = (day: string, upstream: string, orders: object, spent: number, credited: number) => ({
      day,
      upstream,
      product_code: 'ML86',
      orders,
      unpriced: 0,
      spent,
      credited,
      net: spent - credited,
    });
    assert.deepEqual(report.lines, [
      // A~2 SUCCESS and C~2 still PENDING: beta debited both.
      line('2026-11-02', 'beta', counts(1, 0, 0, 0, 1), 31_000, 0),
      // A FAILED (debited, credited back), B REFUNDED the next day (on B's day), C refused (nothing).
      line('2026-11-02', 'default', counts(0, 1, 1, 1, 0), 30_000, 30_000),
      line('2026-11-03', 'beta', counts(1, 0, 0, 0, 0), 15_500, 0),
    ]);
    assert.deepEqual(
      report.totals.map((x: { upstream: string; spent: number; credited: number; net: number }) => [
        x.upstream,
        x.spent,
        x.credited,
        x.net,
      ]),
      [
        ['beta', 46_500, 0, 46_500],
        ['default', 30_000, 30_000, 0],
      ],
    );
    assert.deepEqual(report.open, [
      {
        day: '2026-11-02',
        upstream: 'beta',
        product_code: 'ML86',
        shop_ref: 'C',
        partner_ref: 'C~2',
        invoice_number: 'INV-C~2',
        status: 'PENDING',
        submission: 'accepted',
        debited: 15_500,
        placed_at: '2026-11-02T12:00:00.000Z',
      },
    ]);
    assert.deepEqual(
      { ...report.summary, duration_ms: 0 },
      { days: 2, orders: 4, attempts: 6, open: 1, duration_ms: 0 },
    );
    assert.match(
      json.stderr,
      /^report: 2 day\(s\), 4 order\(s\), 6 attempt\(s\) on 2 upstream\(s\), 1 open, in \d+ ms\n$/,
    );

    // One supplier: only its attempts, the failed-over order's included.
    const beta = JSON.parse(
      (await cli(['--from', '2026-11-02', '--to', '2026-11-03', '--upstream', 'beta', '--json'])).stdout,
    );
    assert.deepEqual(
      beta.lines,
      report.lines.filter((l: { upstream: string }) => l.upstream === 'beta'),
    );
    assert.deepEqual(
      beta.totals.map((x: { upstream: string }) => x.upstream),
      ['beta'],
    );
    const defaultOnly = JSON.parse(
      (await cli(['--from', '2026-11-02', '--to', '2026-11-02', '--upstream', 'default', '--json'])).stdout,
    );
    assert.deepEqual(defaultOnly.lines, [report.lines[1]]);
    assert.deepEqual(defaultOnly.open, []);

    // A name neither the store nor the settings know is a typo: refused, not an empty report.
    const typo = await cli(['--from', '2026-11-02', '--to', '2026-11-03', '--upstream', 'betta']);
    assert.equal(typo.code, 2);
    assert.match(
      typo.stderr,
      /neither the settings nor the store's orders and events name an upstream "betta": the store has held orders of beta, default/,
    );
    // beta is in no settings here, but the store knows it: a day without its attempts is empty.
    const quiet = await cli(['--from', '2026-10-01', '--to', '2026-10-01', '--upstream', 'beta', '--json']);
    assert.equal(quiet.code, 0, quiet.stderr);
    assert.deepEqual(JSON.parse(quiet.stdout).lines, []);
  });

  test('over every day, each supplier’s spent and credited equal what its balance ledger accounted', async (t) => {
    const { store, url, clock } = await backend.tempStore(t);
    await twoSuppliersDays(store, clock);
    const run = await runCli(['report', '--from', '2026-10-30', '--to', '2026-11-05', '--json'], {
      H2H_DB_URL: url,
    });
    assert.equal(run.code, 0, run.stderr);
    const report = JSON.parse(run.stdout);
    for (const upstream of ['default', 'beta']) {
      const ledger = await store.balance.viewOf(upstream);
      const total = report.totals.find((x: { upstream: string }) => x.upstream === upstream);
      assert.deepEqual(
        { spent: total.spent, credited: total.credited, unpriced: total.unpriced },
        { spent: ledger.debited, credited: ledger.credited, unpriced: ledger.unpriced_orders },
        upstream,
      );
    }
    assert.deepEqual(
      report.totals.map((x: { upstream: string; spent: number }) => [x.upstream, x.spent]),
      [
        ['beta', 46_500],
        ['default', 60_000],
      ],
    );
  });

  test('--tz puts the orders on the days of that offset; --csv prints the lines with a header row; the table lists the open attempts apart', async (t) => {
    const { store, url, clock } = await backend.tempStore(t);
    await twoSuppliersDays(store, clock);
    const cli = (args: string[]) => runCli(['report', ...args], { H2H_DB_URL: url });

    // At +07:00, E0 (23:59:59.999Z) is on 11-02 and D (11-03T23:59:59.999Z) on 11-04.
    const shifted = JSON.parse(
      (await cli(['--from', '2026-11-02', '--to', '2026-11-03', '--tz', '+07:00', '--json'])).stdout,
    );
    assert.equal(shifted.tz, '+07:00');
    assert.deepEqual(
      shifted.lines.map((l: { day: string; upstream: string; orders: object }) => [
        l.day,
        l.upstream,
        l.orders,
      ]),
      [
        ['2026-11-02', 'beta', counts(1, 0, 0, 0, 1)],
        ['2026-11-02', 'default', counts(1, 1, 1, 1, 0)],
      ],
    );

    const csv = await cli(['--from', '2026-11-02', '--to', '2026-11-03', '--csv']);
    assert.equal(csv.code, 0, csv.stderr);
    assert.equal(
      csv.stdout,
      [
        'day,upstream,product_code,success,failed,refunded,rejected,open,unpriced,spent,credited,net',
        '2026-11-02,beta,ML86,1,0,0,0,1,0,31000,0,31000',
        '2026-11-02,default,ML86,0,1,1,1,0,0,30000,30000,0',
        '2026-11-03,beta,ML86,1,0,0,0,0,0,15500,0,15500',
        '',
      ].join('\r\n'),
    );

    const table = await cli(['--from', '2026-11-02', '--to', '2026-11-03']);
    assert.equal(table.code, 0, table.stderr);
    assert.match(
      table.stdout,
      /│ 2026-11-02 │ default +│ ML86 +│ 0 +│ 1 +│ 1 +│ 1 +│ 0 +│ 30,000 │ 30,000 +│ 0 +│/,
    );
    assert.match(table.stdout, /Open attempts \(1\)/);
    assert.match(
      table.stdout,
      /│ 2026-11-02 │ beta +│ ML86 +│ C +│ C~2 +│ INV-C~2 +│ PENDING │ 15,500 +│ 2026-11-02T12:00:00.000Z │/,
    );
  });
});

test('report refuses a day that is not YYYY-MM-DD, a range that ends before it starts and a zone it would have to guess, naming the fix (exit 2)', async () => {
  const cases: [string[], RegExp][] = [
    [
      ['--from', '2026-11-31', '--to', '2026-12-01'],
      /expected a day as YYYY-MM-DD, e\.g\. 2026-11-28 \(got "2026-11-31"\)/,
    ],
    [['--from', '2026-11-01', '--to', '1 Dec'], /expected a day as YYYY-MM-DD.*got "1 Dec"/],
    [['--from', '2026-11-02', '--to', '2026-11-01'], /--from 2026-11-02 is after --to 2026-11-01/],
    [
      ['--from', '2026-11-01', '--to', '2026-11-01', '--tz', 'Asia/Jakarta'],
      /a fixed offset from UTC as \+HH:MM.*zone name is not accepted/,
    ],
    [['--from', '2026-11-01', '--to', '2026-11-01', '--csv', '--json'], /cannot be used with/],
  ];
  for (const [args, message] of cases) {
    const run = await runCli(['report', ...args], {});
    assert.equal(run.code, 2, args.join(' '));
    assert.match(run.stderr, message, args.join(' '));
  }
});
