import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import type { RedisTlsFiles } from '../../src/dev/redis-server.js';

/**
 * A private CA and a certificate it signed for 127.0.0.1 (P-256 keys, one day), made with the
 * `openssl` command (`npm run setup -- --tests` installs it); removed when the test ends.
 */
export function loopbackCertificates(t: Pick<TestContext, 'after'>): RedisTlsFiles {
  const dir = mkdtempSync(join(tmpdir(), 'h2h-tls-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const file = (name: string) => join(dir, name);
  const openssl = (...args: string[]) => execFileSync('openssl', args, { stdio: 'pipe' });
  const key = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  openssl(
    'req',
    '-x509',
    ...key,
    '-keyout',
    file('ca.key'),
    '-out',
    file('ca.crt'),
    '-days',
    '1',
    '-subj',
    '/CN=h2h test CA',
  );
  openssl('req', ...key, '-keyout', file('redis.key'), '-out', file('redis.csr'), '-subj', '/CN=127.0.0.1');
  writeFileSync(file('san.ext'), 'subjectAltName=IP:127.0.0.1\n');
  openssl(
    'x509', '-req', '-in', file('redis.csr'), '-CA', file('ca.crt'), '-CAkey', file('ca.key'),
    '-CAcreateserial', '-out', file('redis.crt'), '-days', '1', '-extfile', file('san.ext'),
  ); // biome-ignore format: flag and value pairs
  return { cert: file('redis.crt'), key: file('redis.key'), ca: file('ca.crt') };
}
