// H2H_DB_URL with a primary and its standbys (docs/deployment.md, "PostgreSQL with a standby"):
// what is accepted, what is refused at start-up with the fix named, and the password never shown.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { loadConfig } from '../../src/config/config.js';
import { ConfigError } from '../../src/config/config-error.js';
import { driverSessionAttrs, parseStoreUrl, redactUrl } from '../../src/store/store-url.js';

const SECRET = 's3cret';
const hosts = 'db1.internal:5432,db2.internal:5433';

test('a URL listing several hosts with target_session_attrs=read-write is accepted, and asks the driver for the primary', () => {
  const url = `postgres://h2h:${SECRET}@${hosts}/h2h?target_session_attrs=read-write`;
  assert.deepEqual(parseStoreUrl(url), { backend: 'postgres', url });
  assert.equal(loadConfig({ H2H_DB_URL: url }).dbUrl, url);
  // postgres.js's own read-write check takes a hot standby of PostgreSQL 14+ for writable.
  assert.equal(driverSessionAttrs(url), 'primary');
  assert.equal(driverSessionAttrs(`postgres://h2h@${hosts}/h2h?target_session_attrs=primary`), 'primary');
  assert.equal(driverSessionAttrs('postgres://h2h@db1:5432/h2h'), undefined);
});

test('its password is hidden in the form shown in logs and errors, in the user part and the query', () => {
  assert.equal(
    redactUrl(`postgres://h2h:${SECRET}@${hosts}/h2h?target_session_attrs=read-write&sslpassword=${SECRET}`),
    `postgres://h2h:***@${hosts}/h2h?target_session_attrs=read-write&sslpassword=***`,
  );
  assert.equal(redactUrl(`postgresql://h2h@${hosts}/h2h`), `postgresql://h2h@${hosts}/h2h`);
});

test('a host list the store cannot use safely is refused at start-up, naming the fix and never the password', () => {
  const refused: Array<[string, RegExp]> = [
    [`postgres://h2h:${SECRET}@${hosts}/h2h`, /add \?target_session_attrs=read-write/],
    [
      `postgres://h2h:${SECRET}@${hosts}/h2h?target_session_attrs=any`,
      /add \?target_session_attrs=read-write/,
    ],
    [
      `postgres://h2h:${SECRET}@${hosts}/h2h?target_session_attrs=standby`,
      /the store writes: use target_session_attrs=read-write/,
    ],
    [`postgres://h2h:${SECRET}@db1:5432/h2h?target_session_attrs=prefer-standby`, /the store writes/],
    [`postgres://h2h:${SECRET}@db1:5432,/h2h?target_session_attrs=read-write`, /give each as name:port/],
    [
      `postgres://h2h:${SECRET}@db1:5432,db2:port/h2h?target_session_attrs=read-write`,
      /give each as name:port/,
    ],
    [
      `postgres://h2h:${SECRET}@[::1]:5432,db2/h2h?target_session_attrs=read-write`,
      /IPv6 address needs a host name/,
    ],
  ];
  for (const [url, fix] of refused) {
    assert.throws(
      () => loadConfig({ H2H_DB_URL: url }),
      (error: unknown) =>
        error instanceof ConfigError &&
        /H2H_DB_URL is not valid/.test(error.message) &&
        fix.test(error.message) &&
        !error.message.includes(SECRET),
      url,
    );
  }
});
