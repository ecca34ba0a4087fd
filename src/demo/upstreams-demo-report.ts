import { renderTable } from '../cli/output.js';
import { toPublicJson } from '../cli/public-json.js';
import { shopNotificationsLine } from './demo-shop.js';
import type { UpstreamsDemoRow } from './upstreams-agreement.js';
import { DEMO_UPSTREAMS, type UpstreamsDemoReport } from './upstreams-demo.js';

/** Why a row does not agree, or `yes`. */
function agreeCell(r: UpstreamsDemoRow): string {
  if (r.agrees) return 'yes';
  const why = [
    r.final ? null : 'not final',
    r.storeAgreesWithUpstreams ? null : 'store ≠ upstreams',
    r.successes <= 1 ? null : `${r.successes} SUCCESS`,
    r.shopAgrees ? null : 'shop ≠ store',
  ].filter((w) => w !== null);
  return `NO: ${why.join(', ')}`;
}

/** The two-upstream demo's end table: each order's attempts, and the store, each upstream and the shop side by side. */
export function upstreamsTable(report: UpstreamsDemoReport): string {
  return renderTable(report.rows, [
    { header: 'Partner ref', cell: (r) => r.partnerRef },
    { header: 'Attempts', cell: (r) => r.attempts },
    { header: 'Store', cell: (r) => r.store },
    ...DEMO_UPSTREAMS.map((name) => ({
      header: `Upstream ${name}`,
      cell: (r: UpstreamsDemoRow) => r.upstreams[name] ?? 'none',
    })),
    { header: 'Shop', cell: (r) => r.shop },
    { header: 'Agree', cell: agreeCell },
  ]);
}

/** The lines under the table: what the run did, the balances, the shop, and whether everything agrees. */
export function upstreamsSummaryLines(report: UpstreamsDemoReport): string[] {
  const { totals: t } = report;
  const failovers = Object.entries(t.failovers).map(([code, n]) => `${n} after ${code}`);
  const passedOver = [...new Set(report.rows.flatMap((r) => r.passedOver))];
  const delivered = Object.entries(t.deliveredBy).map(([upstream, n]) => `${n} by ${upstream}`);
  const seconds = (report.elapsedMs / 1000).toFixed(1);
  const lines = [
    `orders: ${t.orders}, attempts: ${t.attempts}; failovers: ${failovers.join(', ') || 'none'}; ` +
      `${t.routedPast} routed straight past a candidate${passedOver.length ? ` (${passedOver.join('; ')})` : ''}`,
    `delivered: ${delivered.join(', ') || 'none'}; ${t.notDelivered} not delivered; ` +
      `most SUCCESS of one order across the upstreams: ${Math.max(0, ...report.rows.map((r) => r.successes))}`,
    `balances: ${report.balances
      .map((b) => `${b.upstream} ${b.simulator} at the simulator, ${b.accounted ?? 'unknown'} accounted`)
      .join('; ')}`,
    shopNotificationsLine(report.shop.notifications),
  ];
  if (report.allAgree) {
    lines.push(
      `all agree: store, upstreams and shop agree on all ${t.orders} orders after ${seconds} s; disagreements: 0; everything the demo started is stopped`,
    );
  } else {
    lines.push(`not all agree: disagreements: ${t.disagreements} of ${t.orders} orders after ${seconds} s:`);
    for (const r of report.rows.filter((row) => !row.agrees)) {
      const upstreams = Object.entries(r.upstreams)
        .map(([name, view]) => `${name} ${view}`)
        .join(', ');
      lines.push(
        `  ${r.partnerRef}: ${r.attempts}; store ${r.store}; ${upstreams}; shop ${r.shop} (${agreeCell(r)})`,
      );
    }
  }
  return lines;
}

/**
 * What `demo --upstreams 2 --json` prints: the report in the public form (snake_case); the shop's
 * orders are public already and go out as they are.
 */
export function publicUpstreamsDemoReport({ shop, ...rest }: UpstreamsDemoReport) {
  return {
    ...toPublicJson(rest),
    shop: { notifications: toPublicJson(shop.notifications), orders: shop.orders },
  };
}
