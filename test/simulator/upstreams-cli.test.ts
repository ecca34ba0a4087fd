import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { startSimulatedUpstreams } from '../../src/simulator/simulated-upstreams.js';
import { readUpstreamsFile } from '../../src/simulator/upstreams-file.js';
import { runCli, spawnCli } from '../helpers/cli.js';
import { type DemoFixture, httpRequest } from '../helpers/simulator.js';
import { waitFor } from '../helpers/wait.js';

const FIXTURES = fileURLToPath(new URL('../../fixtures/', import.meta.url));
const ALPHA_KEY = 'sim_key_demo_M0001';
const BETA_KEY = 'sim_key_beta_B0001';

const fixture = (file: string) => JSON.parse(readFileSync(join(FIXTURES, file), 'utf8')) as DemoFixture;
const get = (url: string, key: string) => httpRequest(url, { headers: { 'x-api-key': key } });

describe('upstreams file', () => {
  test('fixtures/two-upstreams.json: default on the demo fixture at 4010, beta on fixtures/beta.json at 4011 (cheaper, 150,000, fail_ratio 0.25)', async (t) => {
    const entries = await readUpstreamsFile(join(FIXTURES, 'two-upstreams.json'));
    assert.deepEqual(
      entries.map(({ name, fixture, port }) => ({ name, fixture, port })),
      [
        { name: 'default', fixture: join(FIXTURES, 'demo.json'), port: 4010 },
        { name: 'beta', fixture: join(FIXTURES, 'beta.json'), port: 4011 },
      ],
    );
    const beta = fixture('beta.json') as DemoFixture & { fail_ratio: number };
    assert.equal(beta.fail_ratio, 0.25);
    assert.equal(beta.members[0]!.balance, 150_000);
    const demo = fixture('demo.json');
    assert.deepEqual(
      beta.products.map((p) => p.code),
      demo.products.map((p) => p.code),
    );
    demo.products.forEach((product, i) => {
      assert.ok(beta.products[i]!.role_prices.reseller! < product.role_prices.reseller!, product.code);
    });

    // The fixtures the file names start (on free ports, not the file's).
    const sims = await startSimulatedUpstreams(entries.map((entry) => ({ ...entry, port: 0 })));
    t.after(() => sims.close());
    assert.equal((await get(`${sims.get('beta').baseUrl}/profile`, BETA_KEY)).body.member_balance, 150_000);
  });
});

describe('h2h-sync sim --upstreams', () => {
  test('starts every upstream of the file, one "simulator listening:" line each with its name, and stops them all on SIGTERM', async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'h2h-sim-upstreams-'));
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    const file = join(dir, 'upstreams.json');
    writeFileSync(
      file,
      JSON.stringify({
        upstreams: [
          { name: 'alpha', fixture: join(FIXTURES, 'demo.json'), port: 0 },
          { name: 'beta', fixture: join(FIXTURES, 'beta.json'), port: 0, rate_limit: 0 },
        ],
      }),
    );
    const sim = spawnCli(t, ['sim', '--upstreams', file, '--log-level', 'silent'], {});
    const listening = await waitFor(
      () => {
        const lines = [...sim.stdout().matchAll(/^simulator listening: (\S+) \((\S+)\)$/gm)];
        return lines.length === 2 ? new Map(lines.map((m) => [m[2]!, m[1]!])) : undefined;
      },
      { message: `two listening lines (stdout: ${sim.stdout()}, stderr: ${sim.stderr()})` },
    );
    assert.deepEqual([...listening.keys()], ['alpha', 'beta']);
    assert.match(sim.stdout(), /^control API: http:\/\/127\.0\.0\.1:\d+\/__sim \(beta\)$/m);
    assert.equal((await get(`${listening.get('alpha')}/profile`, ALPHA_KEY)).body.member_id, 'M-0001');
    assert.equal((await get(`${listening.get('beta')}/profile`, BETA_KEY)).body.member_id, 'B-0001');

    sim.child.kill('SIGTERM');
    assert.equal(await sim.exited, 0);
    assert.match(sim.stdout(), /simulator stopped\n$/);
  });

  test('a bad file is refused naming the file, the upstream and the field (exit 1); a flag the file sets is a usage error (exit 2)', async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'h2h-sim-upstreams-'));
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    const file = join(dir, 'bad.json');
    writeFileSync(
      file,
      JSON.stringify({
        upstreams: [
          { name: 'alpha', fixture: 'demo.json', port: 0 },
          { name: 'beta', fixture: 'beta.json', port: 0, rate_limit: -1, bogus: true },
        ],
      }),
    );
    const bad = await runCli(['sim', '--upstreams', file], {});
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, new RegExp(`${file.replaceAll('/', '\\/')} is not a valid upstreams file`));
    assert.match(bad.stderr, /upstreams\[1\] \("beta"\)\.rate_limit: /);
    assert.match(bad.stderr, /upstreams\[1\] \("beta"\)\.bogus: unknown field/);

    const badFixture = join(dir, 'bad-fixture.json');
    writeFileSync(
      badFixture,
      JSON.stringify({ upstreams: [{ name: 'beta', fixture: 'nope.json', port: 0 }] }),
    );
    const missing = await runCli(['sim', '--upstreams', badFixture], {});
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /upstream "beta": .*nope\.json: cannot read the fixture file/);

    const withPort = await runCli(['sim', '--upstreams', file, '--port', '4010'], {});
    assert.equal(withPort.code, 2);
    assert.match(withPort.stderr, /'--upstreams <file>' cannot be used with option '--port <port>'/);
  });
});
