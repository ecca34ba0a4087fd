import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type TestContext, test } from 'node:test';
import { ConfigError, catalogSettings, loadConfig } from '../../src/config/config.js';

/** Writes `files` (JSON unless a string) into a directory removed when the test ends; returns their paths. */
function files(t: TestContext, contents: Record<string, unknown>): Record<string, string> {
  const dir = mkdtempSync(join(tmpdir(), 'h2h-product-map-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return Object.fromEntries(
    Object.entries(contents).map(([name, content]) => {
      const path = join(dir, name);
      writeFileSync(path, typeof content === 'string' ? content : JSON.stringify(content));
      return [name, path];
    }),
  );
}

const UPSTREAMS = {
  upstreams: [{ name: 'default' }, { name: 'beta', base_url: 'https://b.example/v1/member-api' }],
};

const refusal = (pattern: RegExp) => (error: unknown) =>
  error instanceof ConfigError && pattern.test(error.message);

test('without H2H_PRODUCT_MAP_FILE no products are linked; with it, its links reach the catalog settings', (t) => {
  assert.deepEqual(catalogSettings(loadConfig({})).productLinks, []);
  const paths = files(t, {
    'upstreams.json': UPSTREAMS,
    'map.json': { products: [{ code: 'ML-86', upstreams: { beta: 'MLBB-86' } }] },
  });
  const config = loadConfig({
    H2H_UPSTREAMS_FILE: paths['upstreams.json'],
    H2H_PRODUCT_MAP_FILE: paths['map.json'],
  });
  assert.deepEqual(catalogSettings(config).productLinks, [{ code: 'ML-86', upstreams: { beta: 'MLBB-86' } }]);
});

test('a bad product map is refused at start-up, naming the file, the entry and the field', (t) => {
  const load = (map: unknown) => () => {
    const paths = files(t, { 'upstreams.json': UPSTREAMS, 'map.json': map });
    return loadConfig({
      H2H_UPSTREAMS_FILE: paths['upstreams.json'],
      H2H_PRODUCT_MAP_FILE: paths['map.json'],
    });
  };
  assert.throws(load('{ nope'), refusal(/H2H_PRODUCT_MAP_FILE .*map\.json is not valid: it is not JSON/));
  assert.throws(
    () => loadConfig({ H2H_PRODUCT_MAP_FILE: '/nonexistent/map.json' }),
    refusal(/H2H_PRODUCT_MAP_FILE \/nonexistent\/map\.json is not valid: it cannot be read \(ENOENT\)/),
  );
  assert.throws(
    load({ products: [{ code: 'ML-86', upstreams: { gamma: 'X' } }] }),
    refusal(
      /products\[0\] \("ML-86"\)\.upstreams\.gamma: no upstream is named "gamma" \(configured: default, beta\)/,
    ),
  );
  assert.throws(
    load({ products: [{ code: 'ML-86', upstreams: { beta: '' } }] }),
    refusal(/products\[0\] \("ML-86"\)\.upstreams\.beta: must be a non-empty product code/),
  );
  assert.throws(
    load({ products: [{ code: 'ML-86', upstream: { beta: 'X' } }] }),
    refusal(/products\[0\] \("ML-86"\): Unrecognized key: "upstream"/),
  );
  assert.throws(
    load({
      products: [
        { code: 'ML-86', upstreams: { beta: 'MLBB-86' } },
        { code: 'ML-86', upstreams: { beta: 'MLBB-87' } },
      ],
    }),
    refusal(/products\[1\] \("ML-86"\)\.code: "ML-86" is listed twice \(also products\[0\]\)/),
  );
  assert.throws(
    load({
      products: [
        { code: 'ML-86', upstreams: { beta: 'MLBB-86' } },
        { code: 'ML-87', upstreams: { beta: 'MLBB-86' } },
      ],
    }),
    refusal(/products\[1\] \("ML-87"\)\.upstreams\.beta: "MLBB-86" is already products\[0\]'s on beta/),
  );
});
