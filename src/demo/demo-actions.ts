import { EXIT } from '../cli/exit-codes.js';
import { renderTable, runAction } from '../cli/output.js';
import { createProgressLine } from '../cli/progress.js';
import { toPublicJson } from '../cli/public-json.js';
import { type DemoReport, runDemo } from './demo.js';
import { DEMO_FAULTS } from './demo-settings.js';
import { shopNotificationsLine } from './demo-shop.js';
import { runUpstreamsDemo } from './upstreams-demo.js';
import { publicUpstreamsDemoReport, upstreamsSummaryLines, upstreamsTable } from './upstreams-demo-report.js';

/** The demo's summary of what the faults did, what reconciling cost and what the shop was sent. */
export function summaryLines({ counts, shop }: DemoReport): string[] {
  const { webhooks: w, receiver: r, reconciler: p } = counts;
  const share = (part: number, whole: number) =>
    whole === 0 ? '0 %' : `${Math.round((100 * part) / whole)} %`;
  return [
    `webhooks: ${w.events} events, ${w.attempts} attempts, ${w.delivered} delivered; ` +
      `${w.dropped} dropped, ${w.duplicated} duplicated, ${w.badSignature} with a bad signature ` +
      `(${r.refusedBadSignature} refused by the receiver), ${w.reordered} reordered`,
    `receiver: ${r.accepted} accepted, ${r.duplicate} recognised as duplicates`,
    `reconciler: ${p.polls} polls, ${p.changed} found a change, ${p.wasted} wasted (no change, ${share(p.wasted, p.polls)}), ` +
      `${p.otherPolls} other; ${p.auditReads} audit reads (${p.auditChanged} found a change); ${counts.stuckOrders} orders stuck in PROCESSING for a while`,
    shopNotificationsLine(shop.notifications),
  ];
}

/**
 * What `demo --json` prints: the report in the public form (snake_case, like everything the CLI
 * prints with `--json`); the shop's orders are public already, and their `data` keys are the
 * shop's own, so they go out as they are.
 */
export function publicDemoReport({ shop, ...rest }: DemoReport) {
  return {
    ...toPublicJson(rest),
    shop: { notifications: toPublicJson(shop.notifications), orders: shop.orders },
  };
}

/** `demo`'s flags (demo-command.ts). */
interface DemoFlags {
  upstreams: 1 | 2;
  perTimeline: number;
  seed: number;
  profile: 'fast' | 'realistic';
  timeScale: number;
  json?: boolean;
}

/** `demo`: runs everything against the simulator with faults, and shows that every order converges. */
export const demo = async (flags: DemoFlags) => {
  if (flags.upstreams === 2) return demoUpstreams(flags);
  await runAction(Boolean(flags.json), async () => {
    const tty = createProgressLine(process.stderr, { enabled: !flags.json });
    const say = (line: string) => {
      if (!flags.json) process.stderr.write(`${line}\n`);
    };
    say(
      'h2h-sync demo: private Redis, simulator, receiver, worker and reconciler, shop API and a small shop, all on this machine',
    );
    say(
      `simulator: ${flags.profile} profile, ${Math.round(1 / flags.timeScale)} simulated seconds per real second, seed ${flags.seed}`,
    );
    say(
      `faults: ${Object.entries(DEMO_FAULTS)
        .map(([k, v]) => `${k}=${v}`)
        .join(' ')}`,
    );
    let lastLine = 0;
    const report = await runDemo({
      perTimeline: flags.perTimeline,
      seed: flags.seed,
      profile: flags.profile,
      timeScale: flags.timeScale,
      onProgress: (equal, total, elapsedMs) => {
        tty.update(equal, total, `store, upstream and shop equal after ${Math.round(elapsedMs / 1000)} s`);
        // Without a terminal, a plain line every 5 s.
        if (!process.stderr.isTTY && elapsedMs - lastLine >= 5000) {
          lastLine = elapsedMs;
          say(
            `${equal}/${total} orders equal in store, upstream and shop after ${Math.round(elapsedMs / 1000)} s`,
          );
        }
      },
    });
    tty.done();
    if (flags.json) {
      process.stdout.write(`${JSON.stringify(publicDemoReport(report), null, 2)}\n`);
    } else {
      process.stdout.write(
        `${renderTable(report.rows, [
          { header: 'Partner ref', cell: (r) => r.partnerRef },
          { header: 'Timeline', cell: (r) => r.timeline },
          { header: 'Store', cell: (r) => r.local },
          { header: 'Upstream', cell: (r) => r.upstream },
          { header: 'Shop', cell: (r) => r.shop },
          { header: 'Equal', cell: (r) => (r.converged && r.shopAgrees ? 'yes' : 'NO') },
        ])}\n`,
      );
      const diverged = report.rows.filter((r) => !r.converged || !r.shopAgrees);
      const seconds = (report.elapsedMs / 1000).toFixed(1);
      if (diverged.length === 0) {
        say(
          `all three equal: store, upstream and shop agree on all ${report.rows.length} orders after ${seconds} s; everything the demo started is stopped`,
        );
      } else {
        say(
          `not all three equal: ${diverged.length} of ${report.rows.length} orders differ after ${seconds} s:`,
        );
        for (const r of diverged) {
          say(
            `  ${r.partnerRef}: store ${r.local}, upstream ${r.upstream}, shop ${r.shop} (version ${r.shopVersion ?? 'none'})`,
          );
        }
      }
      for (const line of summaryLines(report)) say(line);
    }
    process.exitCode = report.allEqual ? EXIT.ok : EXIT.failed;
  });
};

/**
 * `demo --upstreams 2`: the same service on two simulated upstreams, routing by price, and the
 * table of every order's attempts with the store, both upstreams and the shop side by side.
 */
async function demoUpstreams(flags: DemoFlags) {
  await runAction(Boolean(flags.json), async () => {
    const tty = createProgressLine(process.stderr, { enabled: !flags.json });
    const say = (line: string) => {
      if (!flags.json) process.stderr.write(`${line}\n`);
    };
    say(
      'h2h-sync demo: private Redis, two simulated upstreams (default, and beta: cheaper, failing a quarter of its orders, 150000 of balance), receiver, worker, shop API routing by price, and a small shop',
    );
    say(
      `simulators: ${flags.profile} profile, ${Math.round(1 / flags.timeScale)} simulated seconds per real second, seed ${flags.seed}; faults on both: ${Object.entries(
        DEMO_FAULTS,
      )
        .map(([k, v]) => `${k}=${v}`)
        .join(' ')}`,
    );
    let lastLine = 0;
    const report = await runUpstreamsDemo({
      seed: flags.seed,
      profile: flags.profile,
      timeScale: flags.timeScale,
      onProgress: (agreeing, total, elapsedMs) => {
        tty.update(
          agreeing,
          total,
          `store, upstreams and shop agree after ${Math.round(elapsedMs / 1000)} s`,
        );
        if (!process.stderr.isTTY && elapsedMs - lastLine >= 5000) {
          lastLine = elapsedMs;
          say(
            `${agreeing}/${total} orders agree in store, upstreams and shop after ${Math.round(elapsedMs / 1000)} s`,
          );
        }
      },
    });
    tty.done();
    if (flags.json) {
      process.stdout.write(`${JSON.stringify(publicUpstreamsDemoReport(report), null, 2)}\n`);
    } else {
      process.stdout.write(`${upstreamsTable(report)}\n`);
      for (const line of upstreamsSummaryLines(report)) say(line);
    }
    process.exitCode = report.allAgree ? EXIT.ok : EXIT.failed;
  });
}
