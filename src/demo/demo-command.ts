import { type Command, InvalidArgumentError } from 'commander';
import { EXIT, renderTable, runAction } from '../cli/output.js';
import { createProgressLine } from '../cli/progress.js';
import { DEMO_FAULTS, runDemo } from './demo.js';

function wholeNumber(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > 50)
    throw new InvalidArgumentError('expected a whole number from 1 to 50');
  return n;
}

/** Registers `h2h-sync demo`. */
export function registerDemoCommand(program: Command): void {
  program
    .command('demo')
    .description(
      'run everything on embedded defaults against the simulator with faults, and show that every order converges',
    )
    .option('--per-timeline <n>', 'orders per simulator timeline', wholeNumber, 5)
    .option('--seed <n>', 'seed of the simulator faults', wholeNumber, 1)
    .option('--json', 'print the report as JSON')
    .action(async (flags: { perTimeline: number; seed: number; json?: boolean }) => {
      await runAction(Boolean(flags.json), async () => {
        const tty = createProgressLine(process.stderr, { enabled: !flags.json });
        const say = (line: string) => {
          if (!flags.json) process.stderr.write(`${line}\n`);
        };
        say('h2h-sync demo: private Redis, simulator, receiver, worker and reconciler, all on this machine');
        say(
          `faults: ${Object.entries(DEMO_FAULTS)
            .map(([k, v]) => `${k}=${v}`)
            .join(' ')}`,
        );
        let lastLine = 0;
        const report = await runDemo({
          perTimeline: flags.perTimeline,
          seed: flags.seed,
          onProgress: (converged, total, elapsedMs) => {
            tty.update(converged, total, `converged after ${Math.round(elapsedMs / 1000)} s`);
            // Without a terminal, a plain line every 5 s.
            if (!process.stderr.isTTY && elapsedMs - lastLine >= 5000) {
              lastLine = elapsedMs;
              say(`${converged}/${total} orders converged after ${Math.round(elapsedMs / 1000)} s`);
            }
          },
        });
        tty.done();
        if (flags.json) {
          process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
        } else {
          process.stdout.write(
            `${renderTable(report.rows, [
              { header: 'Partner ref', cell: (r) => r.partnerRef },
              { header: 'Timeline', cell: (r) => r.timeline },
              { header: 'Local store', cell: (r) => r.local },
              { header: 'Upstream truth', cell: (r) => r.upstream },
              { header: 'Converged', cell: (r) => (r.converged ? 'yes' : 'NO') },
            ])}\n`,
          );
          const diverged = report.rows.filter((r) => !r.converged);
          const seconds = (report.elapsedMs / 1000).toFixed(1);
          if (diverged.length === 0) {
            say(
              `all ${report.rows.length} orders converged in ${seconds} s; everything the demo started is stopped`,
            );
          } else {
            say(`${diverged.length} of ${report.rows.length} orders diverged after ${seconds} s:`);
            for (const r of diverged) say(`  ${r.partnerRef}: local ${r.local}, upstream ${r.upstream}`);
          }
        }
        process.exitCode = report.converged ? EXIT.ok : EXIT.failed;
      });
    });
}
