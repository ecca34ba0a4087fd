import { ConfigError } from '../../config/config-error.js';
import {
  type SettlementFigures,
  type SettlementLine,
  type SettlementReport,
  SettlementTally,
} from '../../domain/settlement.js';
import { ordersPlaced } from '../../store/settlement-scan.js';
import { type CliContext, openContext } from '../context.js';
import { printPublicJson, renderTable, runAction } from '../output.js';
import { createProgressLine } from '../progress.js';
import { dayStart, daysBetween, formatUtcOffset } from '../report-days.js';

/** `report`'s options, as its definition parsed them (days checked, the offset in minutes). */
export interface ReportFlags {
  from: string;
  to: string;
  upstream?: string;
  tz: number;
  csv?: boolean;
  json?: boolean;
}

/** What `report --json` prints, in the public form (docs/settlement.md). */
export interface ReportView extends Omit<SettlementReport, 'orderCount' | 'attemptCount'> {
  from: string;
  to: string;
  tz: string;
  upstream: string | null;
  summary: { days: number; orders: number; attempts: number; open: number; durationMs: number };
}

const amount = (n: number | null) => (n === null ? '-' : n.toLocaleString('en-US'));

const FIGURE_COLUMNS = [
  { header: 'SUCCESS', cell: (f: SettlementFigures) => f.orders.SUCCESS },
  { header: 'FAILED', cell: (f: SettlementFigures) => f.orders.FAILED },
  { header: 'REFUNDED', cell: (f: SettlementFigures) => f.orders.REFUNDED },
  { header: 'Rejected', cell: (f: SettlementFigures) => f.orders.rejected },
  { header: 'Open', cell: (f: SettlementFigures) => f.orders.open },
  { header: 'Spent', cell: (f: SettlementFigures) => amount(f.spent) },
  { header: 'Credited', cell: (f: SettlementFigures) => amount(f.credited) },
  { header: 'Net', cell: (f: SettlementFigures) => amount(f.net) },
];

function printTable(view: ReportView): void {
  const scope = view.upstream === null ? 'every upstream' : `upstream ${view.upstream}`;
  const out = [
    `Settlement ${view.from} to ${view.to} (days at UTC${view.tz}), ${scope}: each attempt on the day its order was placed`,
  ];
  if (view.lines.length === 0) {
    out.push('No attempts in this range.');
  } else {
    out.push(
      renderTable(view.lines, [
        { header: 'Day', cell: (l) => l.day },
        { header: 'Upstream', cell: (l) => l.upstream },
        { header: 'Product', cell: (l) => l.productCode },
        ...FIGURE_COLUMNS,
      ]),
      'Totals',
      renderTable(view.totals, [{ header: 'Upstream', cell: (t) => t.upstream }, ...FIGURE_COLUMNS]),
    );
  }
  for (const total of view.totals.filter((t) => t.unpriced > 0)) {
    out.push(
      `${total.upstream}: ${total.unpriced} attempt(s) accepted without a known price: their debit is not in Spent`,
    );
  }
  if (view.open.length === 0) {
    if (view.lines.length > 0) out.push('No open attempts: these figures are final but for refunds to come.');
  } else {
    out.push(
      `Open attempts (${view.open.length}): their money may still move`,
      renderTable(view.open, [
        { header: 'Day', cell: (o) => o.day },
        { header: 'Upstream', cell: (o) => o.upstream },
        { header: 'Product', cell: (o) => o.productCode },
        { header: 'Shop ref', cell: (o) => o.shopRef },
        { header: 'Upstream ref', cell: (o) => o.partnerRef },
        { header: 'Invoice', cell: (o) => o.invoiceNumber },
        { header: 'Status', cell: (o) => o.status ?? o.submission },
        { header: 'Debited', cell: (o) => amount(o.debited) },
        { header: 'Placed', cell: (o) => new Date(o.placedAt).toISOString() },
      ]),
    );
  }
  process.stdout.write(`${out.join('\n')}\n`);
}

/** A CSV field, quoted when it holds a comma, a quote or a line break (RFC 4180). */
function csvField(value: string | number | null): string {
  const text = value === null ? '' : String(value);
  return /[",\r\n]/u.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
}

const CSV_HEADER = [
  'day',
  'upstream',
  'product_code',
  'success',
  'failed',
  'refunded',
  'rejected',
  'open',
  'unpriced',
  'spent',
  'credited',
  'net',
];

function printCsv(lines: readonly SettlementLine[]): void {
  const rows = lines.map((l) =>
    [
      l.day,
      l.upstream,
      l.productCode,
      l.orders.SUCCESS,
      l.orders.FAILED,
      l.orders.REFUNDED,
      l.orders.rejected,
      l.orders.open,
      l.unpriced,
      l.spent,
      l.credited,
      l.net,
    ]
      .map(csvField)
      .join(','),
  );
  process.stdout.write(`${[CSV_HEADER.join(','), ...rows].join('\r\n')}\r\n`);
}

/**
 * An `--upstream` with no attempts in the range must be a name the store holds orders of or a
 * configured one: any other is a typo, refused rather than reported as a supplier with nothing
 * to settle. (A supplier since removed from the settings is taken: its orders still settle.)
 */
async function checkUpstreamName(context: CliContext, name: string): Promise<void> {
  const { queries } = context.store!;
  const configured = context.config.upstreams.map((u) => u.name);
  if (configured.includes(name) || (await queries.knowsUpstream(name))) return;
  const inStore = await queries.upstreamsWithOrders();
  throw new ConfigError(
    `--upstream: neither the settings nor the store's orders and events name an upstream "${name}": the store has held orders of ${inStore.join(', ') || 'none'}, and the configured ones are ${configured.join(', ')} (H2H_UPSTREAMS_FILE; docs/upstreams.md)`,
  );
}

/**
 * `report`: reads the orders placed on each day of the range (one index range a day, in pages)
 * and adds up their attempts per day, upstream and product; a progress line on a terminal, a
 * summary line on stderr.
 */
export const report = async (flags: ReportFlags) => {
  await runAction(Boolean(flags.json), async () => {
    const context = await openContext({ store: 'existing' });
    try {
      const started = Date.now();
      const days = daysBetween(flags.from, flags.to);
      const tally = new SettlementTally(flags.upstream === undefined ? {} : { upstream: flags.upstream });
      const progress = createProgressLine();
      const db = context.store!.context.db;
      let read = 0;
      for (const [i, day] of days.entries()) {
        progress.update(i, days.length, `${day}: ${read.toLocaleString('en-US')} orders read`);
        const range = { from: dayStart(day, flags.tz), to: dayStart(day, flags.tz) + 86_400_000 };
        for await (const page of ordersPlaced(db, {
          ...range,
          ...(flags.upstream ? { upstream: flags.upstream } : {}),
        })) {
          for (const row of page) tally.add(row, day);
          read += page.length;
          progress.update(i, days.length, `${day}: ${read.toLocaleString('en-US')} orders read`);
        }
      }
      progress.update(days.length, days.length);
      progress.done();
      const { orderCount, attemptCount, ...report } = tally.report();
      if (flags.upstream !== undefined && attemptCount === 0)
        await checkUpstreamName(context, flags.upstream);
      const view: ReportView = {
        from: flags.from,
        to: flags.to,
        tz: formatUtcOffset(flags.tz),
        upstream: flags.upstream ?? null,
        ...report,
        summary: {
          days: days.length,
          orders: orderCount,
          attempts: attemptCount,
          open: report.open.length,
          durationMs: Date.now() - started,
        },
      };
      if (flags.json) printPublicJson(view);
      else if (flags.csv) printCsv(view.lines);
      else printTable(view);
      const { summary } = view;
      process.stderr.write(
        `report: ${summary.days} day(s), ${summary.orders} order(s), ${summary.attempts} attempt(s) on ${report.totals.length} upstream(s), ${summary.open} open, in ${summary.durationMs} ms\n`,
      );
    } finally {
      await context.close();
    }
  });
};
