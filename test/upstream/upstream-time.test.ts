import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { parseUpstreamTime, readIsoTime } from '../../src/upstream/upstream-time.js';

const TEN_UTC = Date.UTC(2026, 10, 25, 10, 0, 0);

describe('upstream times (spec §2: ISO 8601 UTC)', () => {
  test('a time without Z or an offset is UTC', () => {
    assert.equal(parseUpstreamTime('2026-11-25T10:00:00'), TEN_UTC);
    assert.equal(parseUpstreamTime('2026-11-25 10:00:00'), TEN_UTC);
    assert.equal(parseUpstreamTime('2026-11-25T10:00'), TEN_UTC);
    assert.equal(parseUpstreamTime('2026-11-25T10:00:00.250'), TEN_UTC + 250);
    assert.equal(parseUpstreamTime('2026-11-25'), Date.UTC(2026, 10, 25));
  });

  test('Z and an offset are honoured in every ISO form', () => {
    for (const text of [
      '2026-11-25T10:00:00Z',
      '2026-11-25T10:00:00.000Z',
      '2026-11-25t10:00:00z',
      '2026-11-25T17:00:00+07:00',
      '2026-11-25T17:00:00+0700',
      '2026-11-25T17:00:00+07',
      '2026-11-25T05:30:00-04:30',
      ' 2026-11-25T10:00:00Z ',
    ]) {
      assert.equal(parseUpstreamTime(text), TEN_UTC, text);
    }
    assert.equal(parseUpstreamTime('2026-11-25T10:00:00.123456789Z'), TEN_UTC + 123);
    assert.equal(parseUpstreamTime('2026-11-25T10:00:00,5Z'), TEN_UTC + 500);
  });

  test('anything that is not an ISO 8601 date or date-time is NaN', () => {
    for (const value of [
      '',
      'yesterday',
      '25/11/2026 10:00',
      'Wed, 25 Nov 2026 10:00:00 GMT',
      '2026-13-01T00:00:00Z',
      '2026-11-31T00:00:00Z',
      '2026-02-29T00:00:00Z',
      '2026-11-25T24:00:00Z',
      '2026-11-25T10:60:00Z',
      '2026-11-25T10:00:00+24:00',
      '2026-11-25T10:00:00 +07:00',
      '1764064800000',
      null,
      undefined,
      1764064800000,
    ]) {
      assert.ok(Number.isNaN(parseUpstreamTime(value)), String(value));
    }
    assert.equal(parseUpstreamTime('2028-02-29T00:00:00Z'), Date.UTC(2028, 1, 29), 'a leap day');
  });

  test('readIsoTime says whether a time of day and an offset were given', () => {
    assert.deepEqual(readIsoTime('2026-11-25T17:00:00+07:00'), {
      ms: TEN_UTC,
      hasTime: true,
      hasOffset: true,
    });
    assert.deepEqual(readIsoTime('2026-11-25T10:00:00'), { ms: TEN_UTC, hasTime: true, hasOffset: false });
    assert.deepEqual(readIsoTime('2026-11-25'), {
      ms: Date.UTC(2026, 10, 25),
      hasTime: false,
      hasOffset: false,
    });
    assert.equal(readIsoTime('soon'), undefined);
  });
});
