import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CREDENTIAL_HEADERS, LOG_LEVELS } from '../../src/observability/logger.js';
import { capturedLogger } from '../helpers/logs.js';

const SECRETS = ['k-123', 's-1', 'sig-abc', 'Basic dXNlcjpwdw==', 'cookie-xyz', 'proxy-pw', 'admin-pw'];

/** An HTTP parse error as Node makes it: the request as received hangs on it as `rawPacket`. */
function parseError(): Error {
  const error = Object.assign(new Error('Parse Error: Header overflow'), {
    code: 'HPE_HEADER_OVERFLOW',
    rawPacket: Buffer.from('GET / HTTP/1.1\r\nAuthorization: Basic dXNlcjpwdw==\r\nCookie: cookie-xyz\r\n'),
  });
  return new Error('request refused', { cause: error });
}

for (const level of LOG_LEVELS.filter((l) => l !== 'silent')) {
  test(`at ${level}, log lines never carry a key, secret, password, credential header or raw packet`, () => {
    const { logger, lines } = capturedLogger({ name: 'test', level: 'trace' });
    const log = logger[level].bind(logger);
    log({ config: { apiKey: 'k-123', secrets: ['s-1'], ADMIN_PASSWORD: 'admin-pw' } }, 'config loaded');
    log({ auth: { user: 'u', password: 'admin-pw' } }, 'auth');
    log(
      {
        req: {
          headers: {
            authorization: 'Basic dXNlcjpwdw==',
            'proxy-authorization': 'proxy-pw',
            cookie: 'cookie-xyz',
            'x-api-key': 'k-123',
            'x-signature': 'sig-abc',
            host: 'h',
          },
        },
      },
      'request',
    );
    log({ headers: { 'x-signature': 'sig-abc', 'set-cookie': 'cookie-xyz' } }, 'headers alone');
    log({ err: Object.assign(new Error('bad'), { rawPacket: Buffer.from('Cookie: cookie-xyz') }) }, 'top');
    log({ err: parseError() }, 'nested cause');
    log({ error: { rawPacket: 'Authorization: Basic dXNlcjpwdw==' } }, 'another key');

    assert.equal(lines.length, 7, 'every line was written');
    const all = lines.join('');
    for (const secret of SECRETS) assert.equal(all.includes(secret), false, `${secret} leaked at ${level}`);
    assert.equal(JSON.parse(lines[2]!).req.headers.host, 'h', 'what is not secret stays');
    assert.equal(JSON.parse(lines[4]!).err.message, 'bad', 'the error itself stays');
    assert.equal(JSON.parse(lines[4]!).err.rawPacket, '[redacted]');
    assert.match(JSON.parse(lines[5]!).err.message, /request refused: Parse Error/);
  });
}

test('the credential headers include the signature, cookies and every kind of authorization', () => {
  for (const name of ['authorization', 'proxy-authorization', 'cookie', 'x-api-key', 'x-signature']) {
    assert.ok((CREDENTIAL_HEADERS as readonly string[]).includes(name), name);
  }
});
