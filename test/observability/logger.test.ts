import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { test } from 'node:test';
import { createLogger } from '../../src/observability/logger.js';

test('log lines never carry the API key, secrets, signature or authorization header', () => {
  const lines: string[] = [];
  const destination = new Writable({
    write(chunk, _encoding, done) {
      lines.push(chunk.toString());
      done();
    },
  });
  const logger = createLogger({ name: 'test', destination });
  logger.info({ config: { apiKey: 'k-123', secrets: ['s-1'] } }, 'config loaded');
  logger.info(
    {
      req: {
        headers: { authorization: 'Bearer k-123', 'x-api-key': 'k-123', 'x-signature': 'abc', host: 'h' },
      },
    },
    'request',
  );
  const all = lines.join('');
  for (const secret of ['k-123', 's-1', 'abc']) assert.equal(all.includes(secret), false, `${secret} leaked`);
  assert.equal(JSON.parse(lines[1]!).req.headers.host, 'h');
});
