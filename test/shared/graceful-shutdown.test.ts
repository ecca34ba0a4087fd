import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { type TestContext, test } from 'node:test';
import { FIXTURE_EXEC_ARGV } from '../helpers/fixture-process.js';

interface ShutdownProcess {
  child: ChildProcess;
  /** Resolves with the exit code. */
  exited: Promise<number | null>;
  /** Resolves when the child's close has started. */
  closing: Promise<void>;
  /** Every JSON log line the child wrote, by message. */
  logged(): Array<{ msg: string; level: number; signal?: string; err?: { message: string } }>;
}

async function startShutdownProcess(t: TestContext, timeoutMs = 60_000): Promise<ShutdownProcess> {
  const child = spawn(
    process.execPath,
    [...FIXTURE_EXEC_ARGV, 'test/fixtures/shutdown-process.ts', String(timeoutMs)],
    { stdio: ['ignore', 'pipe', 'inherit', 'ipc'] },
  );
  t.after(() => child.kill('SIGKILL'));
  let stdout = '';
  child.stdout!.on('data', (chunk) => {
    stdout += chunk;
  });
  const exited = once(child, 'exit').then(([code]) => code as number | null);
  const messages = new Map<string, Promise<void>>(
    ['ready', 'closing'].map((name) => [
      name,
      new Promise<void>((resolve) => child.on('message', (m) => m === name && resolve())),
    ]),
  );
  await messages.get('ready');
  return {
    child,
    exited,
    closing: messages.get('closing')!,
    logged: () =>
      stdout
        .split('\n')
        .filter(Boolean)
        .map((line) => JSON.parse(line)),
  };
}

const messagesOf = (p: ShutdownProcess) => p.logged().map((line) => line.msg);

test('SIGINT (what pm2 stop sends) runs the close and exits 0 when everything stopped', async (t) => {
  const p = await startShutdownProcess(t);
  p.child.kill('SIGINT');
  await p.closing;
  p.child.send('graceful');
  assert.equal(await p.exited, 0);
  assert.deepEqual(
    p.logged().map((line) => [line.msg, line.signal]),
    [['test-process stopping', 'SIGINT']],
  );
});

test('SIGTERM with a component abandoned exits 1 and says so', async (t) => {
  const p = await startShutdownProcess(t);
  p.child.kill('SIGTERM');
  await p.closing;
  p.child.send('abandoned');
  assert.equal(await p.exited, 1);
  const failed = p.logged().find((line) => line.msg === 'test-process did not stop cleanly; exiting 1');
  assert.match(failed?.err?.message ?? '', /a component had to be abandoned/);
});

test('a close that outlasts the timeout exits 1 at the deadline', async (t) => {
  const p = await startShutdownProcess(t, 50);
  p.child.kill('SIGTERM');
  assert.equal(await p.exited, 1);
  assert.deepEqual(messagesOf(p), ['test-process stopping', 'test-process stop timed out; exiting anyway']);
});

test('a second signal during the close exits 1 at once', async (t) => {
  const p = await startShutdownProcess(t);
  p.child.kill('SIGINT');
  await p.closing;
  p.child.kill('SIGINT');
  assert.equal(await p.exited, 1);
  assert.deepEqual(messagesOf(p), [
    'test-process stopping',
    'test-process: second SIGINT while stopping; exiting now',
  ]);
});

for (const [kind, message] of [
  ['throw', 'boom from a callback'],
  ['reject', 'a rejection nobody handles'],
] as const) {
  test(`an uncaught ${kind === 'throw' ? 'exception' : 'rejection'} is logged, the close still runs, and the exit is 1`, async (t) => {
    const p = await startShutdownProcess(t);
    p.child.send(kind);
    await p.closing;
    p.child.send('graceful');
    assert.equal(await p.exited, 1);
    const [first] = p.logged();
    assert.equal(first?.msg, 'test-process: uncaught error; stopping, then exiting 1');
    assert.equal(first?.level, 60, 'logged as fatal');
    assert.equal(first?.err?.message, message);
  });
}
