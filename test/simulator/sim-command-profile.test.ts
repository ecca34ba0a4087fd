import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { test } from 'node:test';
import { createSimulator } from '../../src/simulator/index.js';
import { runCli } from '../helpers/cli.js';
import { userIdEndingIn } from '../helpers/simulator.js';

const KEY = 'sim_key_demo_M0001';

/** Creates `count` orders one after the other and returns their drawn timelines. */
async function timelines(baseUrl: string, origin: string, count: number): Promise<unknown[]> {
  const drawn: unknown[] = [];
  for (let i = 0; i < count; i++) {
    const created = await fetch(`${baseUrl}/orders`, {
      method: 'POST',
      headers: { 'x-api-key': KEY, 'content-type': 'application/json' },
      body: JSON.stringify({
        product_code: 'MLBB-86',
        partner_ref: `cli-${i}`,
        data: { user_id: userIdEndingIn('1234'), server_id: '2001' },
      }),
    });
    assert.equal(created.status, 201);
    const { stuck, steps } = (await (await fetch(`${origin}/__sim/orders/cli-${i}/timeline`)).json()) as {
      stuck: boolean;
      steps: unknown[];
    };
    drawn.push({ stuck, steps });
  }
  return drawn;
}

test('h2h-sync sim --profile realistic --seed N draws the same timelines as createSimulator with that profile and seed', async (t) => {
  const child = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      'src/cli/main.ts',
      'sim',
      '--fixture',
      'fixtures/demo.json',
      '--port',
      '0',
      '--profile',
      'realistic',
      '--seed',
      '17',
      '--speed',
      '60',
      '--rate-limit',
      '0',
      '--log-level',
      'silent',
    ],
    { env: { PATH: process.env.PATH ?? '' }, stdio: ['ignore', 'pipe', 'inherit'] },
  );
  t.after(async () => {
    if (child.exitCode === null) {
      child.kill('SIGTERM');
      await once(child, 'exit');
    }
  });
  let out = '';
  child.stdout.setEncoding('utf8');
  const baseUrl = await new Promise<string>((resolve, reject) => {
    child.stdout.on('data', (chunk: string) => {
      out += chunk;
      const match = out.match(/simulator listening: (\S+)/);
      if (match) resolve(match[1]!);
    });
    child.once('exit', (code) => reject(new Error(`sim exited ${code}: ${out}`)));
  });
  const origin = new URL(baseUrl).origin;
  const fromCli = await timelines(baseUrl, origin, 12);

  const sim = await createSimulator({
    fixture: 'fixtures/demo.json',
    profile: 'realistic',
    seed: 17,
    speed: 60,
    rateLimit: 0,
  });
  t.after(() => sim.close());
  assert.deepEqual(await timelines(sim.baseUrl, sim.origin, 12), fromCli);
});

test('h2h-sync sim refuses an unknown profile and --time-scale with --speed, naming the flags', async () => {
  const profile = await runCli(['sim', '--fixture', 'fixtures/demo.json', '--profile', 'slow'], {});
  assert.equal(profile.code, 2, 'a usage error exits 2');
  assert.match(profile.stderr, /--profile/);
  const both = await runCli(
    ['sim', '--fixture', 'fixtures/demo.json', '--port', '0', '--time-scale', '0.5', '--speed', '60'],
    {},
  );
  assert.equal(both.code, 2, 'a usage error exits 2');
  assert.match(both.stderr, /--speed.*--time-scale/);
});
