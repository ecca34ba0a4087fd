import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { Webhook } from 'standardwebhooks';
import { NotificationVerificationError, verifyNotification } from '../../src/lib/index.js';

const run = promisify(execFile);

/** Imports `specifier` in a fresh Node process as a shop would, resolving this package's `exports` from source. */
async function importInNode(code: string) {
  const { stdout } = await run(process.execPath, [
    '--conditions=source',
    '--import',
    'tsx',
    '--input-type=module',
    '-e',
    code,
  ]);
  return stdout.trim();
}

test("the package exports only its library entry: the API's types, the notification verifier and the upstream client", async () => {
  const names = JSON.parse(
    await importInNode(
      "const lib = await import('h2h-sync'); console.log(JSON.stringify(Object.keys(lib).sort()));",
    ),
  );
  assert.deepEqual(names, [
    'FEED_EVENT_TYPES',
    'NotificationVerificationError',
    'ORDER_EVENT_TYPES',
    'UpstreamClient',
    'UpstreamError',
    'UpstreamUnreachableError',
    'verifyNotification',
  ]);
  const deep = await importInNode(
    "try { await import('h2h-sync/src/store/feed.ts'); console.log('imported'); } catch (e) { console.log(e.code); }",
  );
  assert.equal(deep, 'ERR_PACKAGE_PATH_NOT_EXPORTED', 'private modules stay private');
});

test('verifyNotification accepts a notification signed per Standard Webhooks, with either secret of a rotation, and refuses a changed one', () => {
  const secret = `whsec_${Buffer.alloc(32, 7).toString('base64')}`;
  const older = `whsec_${Buffer.alloc(32, 9).toString('base64')}`;
  const body = JSON.stringify({
    type: 'order.updated',
    timestamp: new Date().toISOString(),
    data: { partner_ref: 'R1', version: 2 },
  });
  const id = 'evt_42';
  const now = new Date();
  const headers = {
    'Webhook-Id': id,
    'webhook-timestamp': String(Math.floor(now.getTime() / 1000)),
    'webhook-signature': new Webhook(secret).sign(id, now, body),
  };
  const verified = verifyNotification(secret, body, headers);
  assert.equal(verified.type === 'order.updated' ? verified.data.partner_ref : undefined, 'R1');
  assert.equal(verifyNotification([older, secret], Buffer.from(body), headers).type, 'order.updated');
  assert.throws(
    () => verifyNotification(secret, body.replace('R1', 'R2'), headers),
    NotificationVerificationError,
  );
  assert.throws(() => verifyNotification(older, body, headers), /does not verify/);
  assert.throws(
    () => verifyNotification(secret, body, { ...headers, 'webhook-signature': undefined }),
    /webhook-signature header is missing/,
  );
});
