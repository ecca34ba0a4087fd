import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { test } from 'node:test';
import { signedWebhookHeaders, signWebhook, verifyWebhookSignature } from '../../src/upstream/signature.js';

const body = Buffer.from('{"event_id":"evt_1","data":{"partner_ref":"ü/ref"}}');
const now = 1_800_000_000;

test('signWebhook is lowercase hex HMAC-SHA256 of timestamp.rawBody (checked with an independent HMAC)', () => {
  const expected = createHmac('sha256', 's3cret')
    .update(Buffer.concat([Buffer.from(`${now}.`), body]))
    .digest('hex');
  assert.equal(signWebhook('s3cret', now, body), expected);
  assert.match(expected, /^[0-9a-f]{64}$/);
});

test('a valid signature within tolerance verifies and names the secret that matched', () => {
  const headers = signedWebhookHeaders('new', body, now - 299);
  const result = verifyWebhookSignature({
    rawBody: body,
    timestamp: headers['x-timestamp'],
    signature: headers['x-signature'],
    secrets: ['newest', 'new'],
    nowS: now,
  });
  assert.deepEqual(result, { ok: true, timestamp: now - 299, secretIndex: 1 });
});

test('one changed byte of the raw body fails verification', () => {
  const headers = signedWebhookHeaders('s', body, now);
  const tampered = Buffer.from(body);
  tampered[5] = tampered[5]! ^ 1;
  const result = verifyWebhookSignature({
    rawBody: tampered,
    timestamp: headers['x-timestamp'],
    signature: headers['x-signature'],
    secrets: ['s'],
    nowS: now,
  });
  assert.equal(result.ok, false);
  assert.equal(!result.ok && result.code, 'INVALID_SIGNATURE');
});

test('missing headers, malformed hex and wrong lengths are failures, never exceptions', () => {
  const good = signWebhook('s', now, body);
  const cases: Array<[string | undefined, string | undefined, string]> = [
    [undefined, good, 'SIGNATURE_MISSING'],
    [String(now), undefined, 'SIGNATURE_MISSING'],
    [String(now), '', 'SIGNATURE_MISSING'],
    [String(now), 'zz'.repeat(32), 'INVALID_SIGNATURE'],
    [String(now), good.slice(0, 62), 'INVALID_SIGNATURE'],
    [String(now), `${good}00`, 'INVALID_SIGNATURE'],
    [String(now), `sha256=${good}`, 'INVALID_SIGNATURE'],
  ];
  for (const [timestamp, signature, code] of cases) {
    const result = verifyWebhookSignature({ rawBody: body, timestamp, signature, secrets: ['s'], nowS: now });
    assert.equal(result.ok ? 'ok' : result.code, code, `timestamp=${timestamp} signature=${signature}`);
  }
});

test('an authentic but stale or future timestamp is refused as out of tolerance and flagged authentic', () => {
  for (const ts of [now - 301, now + 301]) {
    const headers = signedWebhookHeaders('s', body, ts);
    const result = verifyWebhookSignature({
      rawBody: body,
      timestamp: headers['x-timestamp'],
      signature: headers['x-signature'],
      secrets: ['s'],
      nowS: now,
    });
    assert.deepEqual(result.ok ? null : [result.code, result.authentic], [
      'TIMESTAMP_OUT_OF_TOLERANCE',
      true,
    ]);
  }
  const custom = signedWebhookHeaders('s', body, now - 20);
  const strict = verifyWebhookSignature({
    rawBody: body,
    timestamp: custom['x-timestamp'],
    signature: custom['x-signature'],
    secrets: ['s'],
    nowS: now,
    toleranceS: 10,
  });
  assert.equal(strict.ok, false);
});

test('a secret that is not configured (rotated out) no longer verifies', () => {
  const headers = signedWebhookHeaders('old', body, now);
  const result = verifyWebhookSignature({
    rawBody: body,
    timestamp: headers['x-timestamp'],
    signature: headers['x-signature'],
    secrets: ['new'],
    nowS: now,
  });
  assert.equal(result.ok ? 'ok' : result.code, 'INVALID_SIGNATURE');
});
