import assert from 'node:assert/strict';
import { test } from 'node:test';
import { runCli } from '../helpers/cli.js';

test('demo takes one or two upstreams, and --per-timeline only with one: anything else is a usage error before anything starts', async () => {
  const three = await runCli(['demo', '--upstreams', '3'], {});
  assert.equal(three.code, 2, three.stderr);
  assert.match(three.stderr, /--upstreams <n>.*expected 1 or 2/);

  const perTimeline = await runCli(['demo', '--upstreams', '2', '--per-timeline', '2'], {});
  assert.equal(perTimeline.code, 2, perTimeline.stderr);
  assert.match(perTimeline.stderr, /'--per-timeline' is for one upstream/);
});
