import assert from 'node:assert/strict';
import { fork } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { ProcessEvent, ProcessReport } from '../fixtures/apply-events-process.js';
import { FIXTURE_EXEC_ARGV } from '../helpers/fixture-process.js';
import { nextMessage, snapshot } from '../helpers/store.js';
import { describeEachBackend } from '../helpers/store-backends.js';

const CHILD = fileURLToPath(new URL('../fixtures/apply-events-process.ts', import.meta.url));
const ORDERS = 200;

/** Every event of every order: refunded orders for even numbers, failed ones for odd numbers. */
function allEvents(): ProcessEvent[] {
  const events: ProcessEvent[] = [];
  for (let n = 0; n < ORDERS; n++) {
    const ref = `C${n}`;
    const timeline =
      n % 2 === 0
        ? [
            snapshot(ref, 'PENDING'),
            snapshot(ref, 'PROCESSING'),
            snapshot(ref, 'SUCCESS'),
            snapshot(ref, 'SUCCESS', { serial_number: `SN-${n}` }),
            snapshot(ref, 'REFUNDED', { serial_number: `SN-${n}` }),
          ]
        : [snapshot(ref, 'PENDING'), snapshot(ref, 'PROCESSING'), snapshot(ref, 'FAILED')];
    for (const [i, s] of timeline.entries()) events.push({ eventId: `${ref}-${i}`, snapshot: s });
  }
  return events;
}

describeEachBackend('two processes on one store', (backend) => {
  test('two processes applying the same events at the same time end consistent, with no busy errors', async (t) => {
    const url = await backend.emptyUrl(t);
    const dir = mkdtempSync(join(tmpdir(), 'h2h-events-'));
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    const events = allEvents();
    const forward = join(dir, 'forward.json');
    const backward = join(dir, 'backward.json');
    writeFileSync(forward, JSON.stringify(events));
    writeFileSync(backward, JSON.stringify([...events].reverse()));

    // Both open the fresh store at once, so they also race through the migrations.
    const children = [forward, backward].map((file) =>
      fork(CHILD, [url, file], { execArgv: FIXTURE_EXEC_ARGV, stdio: 'inherit' }),
    );
    t.after(() => {
      for (const child of children) if (child.exitCode === null) child.kill();
    });
    await Promise.all(children.map((child) => nextMessage<string>(child)));
    const reports = Promise.all(children.map((child) => nextMessage<ProcessReport>(child)));
    for (const child of children) child.send('go');
    const [a, b] = await reports;

    assert.deepEqual([...a!.errors, ...b!.errors], []);
    assert.equal(a!.applied + b!.applied, events.length, 'each event applied by exactly one process');
    assert.equal(a!.duplicates + b!.duplicates, events.length, 'and seen as a duplicate by the other');

    const store = await backend.open(t, url);
    assert.equal((await store.queries.eventsAfter(0, events.length + 1)).length, events.length);
    for (let n = 0; n < ORDERS; n++) {
      const order = (await store.queries.getOrder(`C${n}`))!;
      if (n % 2 === 0) {
        assert.deepEqual([order.status, order.serialNumber], ['REFUNDED', `SN-${n}`], order.partnerRef);
      } else {
        assert.deepEqual([order.status, order.serialNumber], ['FAILED', null], order.partnerRef);
      }
      assert.equal(order.nextPollAt, null, order.partnerRef);
    }
  });
});
