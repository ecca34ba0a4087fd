import assert from 'node:assert/strict';
import { test } from 'node:test';
import { storeBackends } from '../helpers/store-backends.js';

test('the store tests run on both backends unless H2H_TEST_STORE names one; a name of none fails the run', () => {
  assert.deepEqual(
    storeBackends({}).map((b) => b.name),
    ['sqlite', 'postgres'],
  );
  assert.deepEqual(
    storeBackends({ H2H_TEST_STORE: ' sqlite ' }).map((b) => b.name),
    ['sqlite'],
  );
  assert.deepEqual(
    storeBackends({ H2H_TEST_STORE: 'postgres' }).map((b) => b.name),
    ['postgres'],
  );
  assert.throws(
    () => storeBackends({ H2H_TEST_STORE: 'mysql' }),
    /^Error: H2H_TEST_STORE must be one of sqlite, postgres \(or unset for all\), got "mysql"$/,
  );
});
