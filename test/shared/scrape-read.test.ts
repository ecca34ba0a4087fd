import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Registry } from 'prom-client';
import { scrapedGauges } from '../../src/shared/scrape-read.js';

test('scraped gauges show the rows of one read a scrape, and a row gone since leaves no series behind', async () => {
  const registry = new Registry();
  let rows = [
    { upstream: 'default', balance: 100, drift: 0 },
    { upstream: 'beta', balance: 50, drift: -5 },
  ];
  let reads = 0;
  const scraped = scrapedGauges(registry, async () => {
    reads++;
    return rows;
  });
  for (const key of ['balance', 'drift'] as const) {
    scraped(`test_${key}`, key, ['upstream'], (gauge, row) =>
      gauge.set({ upstream: row.upstream }, row[key]),
    );
  }
  const series = async () =>
    (await registry.getMetricsAsJSON()).map((m) => [
      m.name,
      m.values.map((v) => [v.labels.upstream, v.value]),
    ]);

  assert.deepEqual(await series(), [
    [
      'test_balance',
      [
        ['default', 100],
        ['beta', 50],
      ],
    ],
    [
      'test_drift',
      [
        ['default', 0],
        ['beta', -5],
      ],
    ],
  ]);
  assert.equal(reads, 1);
  rows = [{ upstream: 'default', balance: 90, drift: 0 }];
  assert.deepEqual(await series(), [
    ['test_balance', [['default', 90]]],
    ['test_drift', [['default', 0]]],
  ]);
  assert.equal(reads, 2);
});
