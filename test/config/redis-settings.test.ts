import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ConfigError, loadConfig } from '../../src/config/config.js';
import { parseRedisAddress, redactRedisAddress } from '../../src/shared/redis-address.js';

const SENTINELS = {
  REDIS_URL: 'rediss://app:s3cret@ignored.example:6390/2',
  H2H_REDIS_SENTINELS: '10.0.0.1:26379, 10.0.0.2, [fd00::3]:26380',
  H2H_REDIS_SENTINEL_MASTER: 'h2h',
  H2H_REDIS_SENTINEL_PASSWORD: 'sentinel-pw',
};

test('with H2H_REDIS_SENTINELS every connection asks the sentinels for the primary, with REDIS_URL’s scheme, credentials and database', () => {
  const { redisUrl } = loadConfig(SENTINELS);
  assert.deepEqual(parseRedisAddress(redisUrl), {
    kind: 'sentinel',
    masterName: 'h2h',
    sentinels: [
      { host: '10.0.0.1', port: 26379 },
      { host: '10.0.0.2', port: 26379 },
      { host: 'fd00::3', port: 26380 },
    ],
    tls: true,
    username: 'app',
    password: 's3cret',
    sentinelPassword: 'sentinel-pw',
    db: 2,
  });
});

test('without H2H_REDIS_SENTINELS the address is REDIS_URL as given', () => {
  const url = 'rediss://:pw@redis.example:6390/1';
  assert.deepEqual(parseRedisAddress(loadConfig({ REDIS_URL: url }).redisUrl), { kind: 'url', url });
});

test('the Sentinel address in logs and messages shows neither password', () => {
  const shown = redactRedisAddress(loadConfig(SENTINELS).redisUrl);
  assert.ok(!shown.includes('s3cret') && !shown.includes('sentinel-pw'), shown);
  assert.match(
    shown,
    /^rediss\+sentinel:\/\/app:\*\*\*@h2h\/2\?sentinels=10\.0\.0\.1:26379,10\.0\.0\.2:26379,\[fd00::3\]:26380/,
  );
});

test('sentinel settings that cannot work are refused at start-up, naming the fix', () => {
  const refused = (env: Record<string, string>, pattern: RegExp) =>
    assert.throws(
      () => loadConfig(env),
      (error: unknown) => error instanceof ConfigError && pattern.test(error.message),
    );
  refused({ H2H_REDIS_SENTINELS: '10.0.0.1:26379' }, /set H2H_REDIS_SENTINEL_MASTER/);
  refused({ H2H_REDIS_SENTINEL_MASTER: 'h2h' }, /need H2H_REDIS_SENTINELS/);
  refused(
    { H2H_REDIS_SENTINELS: '10.0.0.1:port', H2H_REDIS_SENTINEL_MASTER: 'h2h' },
    /H2H_REDIS_SENTINELS must list host:port entries/,
  );
  refused(
    { H2H_RECEIVER_REPLICA_ACKS: '1', H2H_RECEIVER_REPLICA_ACK_TIMEOUT_MS: '1000' },
    /twice H2H_RECEIVER_REPLICA_ACK_TIMEOUT_MS \(1000\) must be below H2H_ENQUEUE_TIMEOUT_MS \(2000\)/,
  );
});

test('a bad REDIS_URL is refused without showing its password', () => {
  assert.throws(
    () => loadConfig({ REDIS_URL: 'http://:hunter2@localhost' }),
    (error: unknown) =>
      error instanceof ConfigError && /REDIS_URL=/.test(error.message) && !error.message.includes('hunter2'),
  );
});
