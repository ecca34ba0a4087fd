import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { UpstreamError, UpstreamUnreachableError } from '../../src/upstream/errors.js';

const where = { method: 'GET', path: '/v1/member-api/profile', attempts: 1 };

describe('upstream errors', () => {
  test('IP_NOT_WHITELISTED names the IP to add, bare or inside a sentence, IPv4 or IPv6', () => {
    for (const [detail, ip] of [
      ['203.0.113.7', '203.0.113.7'],
      ['sender 203.0.113.7 is not whitelisted', '203.0.113.7'],
      ['::ffff:127.0.0.1', '::ffff:127.0.0.1'],
      ['2001:db8::1', '2001:db8::1'],
    ] as const) {
      const error = new UpstreamError({ ...where, status: 401, code: 'IP_NOT_WHITELISTED', detail });
      assert.equal(error.fix, `add ${ip} to the member's whitelist`);
    }
    const bare = new UpstreamError({
      ...where,
      status: 401,
      code: 'IP_NOT_WHITELISTED',
      detail: 'Unauthorized',
    });
    assert.equal(bare.fix, "add this server's IP to the member's whitelist");
  });

  test('a known code takes its fix from the model; an unknown one falls back on its status', () => {
    const known = new UpstreamError({
      ...where,
      status: 400,
      code: 'INVALID_PRODUCT',
      detail: 'product_code',
    });
    const unknown4xx = new UpstreamError({ ...where, status: 400, code: 'SOMETHING_NEW', detail: 'x' });
    const unknown5xx = new UpstreamError({ ...where, status: 503, code: 'SERVICE_UNAVAILABLE', detail: '' });

    assert.equal(known.fix, 'use an active product code or id that is enabled for the API');
    assert.equal(known.retryable, false);
    assert.equal(
      known.message,
      'GET /v1/member-api/profile failed with 400 INVALID_PRODUCT (product_code): use an active product code or id that is enabled for the API',
    );
    assert.match(unknown4xx.fix, /fix the request/);
    assert.equal(unknown4xx.retryable, false);
    assert.equal(unknown5xx.code, 'SERVICE_UNAVAILABLE');
    assert.equal(unknown5xx.retryable, true);
    assert.match(unknown5xx.fix, /retry later/);
  });

  test('UpstreamUnreachableError says the outcome is unknown, and for a POST how to find out', () => {
    const cause = Object.assign(new Error('Headers Timeout Error'), { code: 'UND_ERR_HEADERS_TIMEOUT' });
    const error = new UpstreamUnreachableError({
      code: 'TIMEOUT',
      method: 'POST',
      path: '/v1/member-api/orders',
      attempts: 4,
      cause,
    });

    assert.equal(error.outcomeUnknown, true);
    assert.equal(error.cause, cause);
    assert.equal(
      error.message,
      'POST /v1/member-api/orders timed out after 4 attempts (Headers Timeout Error); the outcome is unknown, not failed: ' +
        'the order may exist: read it by its partner_ref, or repeat with the same partner_ref',
    );
  });
});
