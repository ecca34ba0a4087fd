import assert from 'node:assert/strict';
import { test } from 'node:test';
import { partnerRefProblem } from '../../src/upstream/model.js';

test('a partner_ref is 1 to 64 characters, counted in code points as the spec counts characters', () => {
  for (const ok of ['r', 'x'.repeat(64), '😀'.repeat(64), `${'ü'.repeat(63)}日`]) {
    assert.equal(partnerRefProblem(ok), undefined, `${[...ok].length} characters`);
  }
  assert.equal(partnerRefProblem(''), 'partner_ref: must not be empty');
  for (const tooLong of ['x'.repeat(65), `${'😀'.repeat(64)}x`]) {
    assert.equal(
      partnerRefProblem(tooLong),
      'partner_ref: at most 64 characters (Unicode code points), got 65',
    );
  }
});
