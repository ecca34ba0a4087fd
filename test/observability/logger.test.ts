import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { test } from 'node:test';
import { LOG_LEVELS } from '../../src/observability/defaults.js';
import { CREDENTIAL_HEADERS, createLogger, prettyLogs } from '../../src/observability/logger.js';
import { capturedLogger } from '../helpers/logs.js';
import { waitFor } from '../helpers/wait.js';

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

test('pretty logs (LOG_FORMAT=pretty) are censored as JSON ones, at every level', async () => {
  let text = '';
  const destination = new Writable({
    write(chunk, _encoding, done) {
      text += chunk.toString();
      done();
    },
  });
  const logger = createLogger({ name: 'test', level: 'trace', format: 'pretty', destination });
  const levels = LOG_LEVELS.filter((l) => l !== 'silent');
  for (const level of levels) {
    const log = logger[level].bind(logger);
    log({ config: { apiKey: 'k-123', secrets: ['s-1'], ADMIN_PASSWORD: 'admin-pw' } }, `config at ${level}`);
    log(
      {
        req: {
          headers: {
            authorization: 'Basic dXNlcjpwdw==',
            'proxy-authorization': 'proxy-pw',
            cookie: 'cookie-xyz',
            'x-api-key': 'k-123',
            'x-signature': 'sig-abc',
          },
        },
      },
      `request at ${level}`,
    );
    log({ err: parseError() }, `parse error at ${level}`);
  }
  logger.info('last line');
  // pino-pretty is a stream: wait until the last record has come through it.
  await waitFor(() => text.includes('last line'), { message: 'the pretty output' });

  for (const level of levels) {
    assert.match(text, new RegExp(`${level.toUpperCase()}.*\\(test\\): config at ${level}`));
    assert.match(text, new RegExp(`parse error at ${level}`));
  }
  assert.equal(text.startsWith('{'), false, 'not JSON');
  for (const secret of SECRETS)
    assert.equal(text.includes(secret), false, `${secret} leaked in pretty output`);
  assert.match(text, /\[redacted\]/);
});

test('LOG_FORMAT auto is pretty on a terminal and JSON elsewhere; json and pretty force it', () => {
  assert.equal(prettyLogs('auto', { isTTY: true }), true);
  assert.equal(prettyLogs('auto', { isTTY: false }), false);
  assert.equal(prettyLogs('auto', {}), false);
  assert.equal(prettyLogs('json', { isTTY: true }), false);
  assert.equal(prettyLogs('pretty', { isTTY: false }), true);
});
