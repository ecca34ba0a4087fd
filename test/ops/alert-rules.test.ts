import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { parse } from 'yaml';
import { loadConfig, receiverSettings } from '../../src/config/config.js';
import { freePort } from '../../src/dev/redis-server.js';
import { startReceiver } from '../../src/receiver/server.js';
import { startWorkerProcess } from '../../src/worker/server.js';
import { SECRET } from '../helpers/receiver.js';
import { privateRedis } from '../helpers/redis.js';
import { startSimulator } from '../helpers/simulator.js';
import { tempDbPath } from '../helpers/store.js';
import { cleanupScope } from '../helpers/worker.js';

/**
 * The shipped alerting rules (deploy/prometheus/) and dashboard (deploy/grafana/): promtool
 * checks the rules and runs their unit tests, every alert links its own runbook section, and
 * every metric they name is one the receiver or the worker really serves, read from their
 * /metrics endpoints rather than from a list kept by hand.
 */

const RULES = 'deploy/prometheus/h2h-sync-rules.yml';
const RULE_TESTS = 'deploy/prometheus/h2h-sync-rules.test.yml';
const DASHBOARD = 'deploy/grafana/h2h-sync.json';
const RUNBOOK = 'docs/operations.md';
/** Where the rules' runbook links start; the operator replaces it (docs/operations.md, "Alerts"). */
const RUNBOOK_BASE = 'https://h2h-sync.invalid/';

/** Series Prometheus makes itself, not the service. */
const PROMETHEUS_OWN = new Set(['up']);

interface AlertRule {
  alert: string;
  expr: string;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

function alertRules(): AlertRule[] {
  const { groups } = parse(readFileSync(RULES, 'utf8')) as { groups: Array<{ rules: AlertRule[] }> };
  return groups.flatMap((group) => group.rules);
}

function promtool(...args: string[]) {
  const run = spawnSync('promtool', args, { encoding: 'utf8' });
  assert.equal(
    run.error,
    undefined,
    'promtool runs (scripts/setup.sh --tests installs Debian’s prometheus package)',
  );
  return { status: run.status, output: `${run.stdout}${run.stderr}` };
}

/** GitHub's anchor of a Markdown heading: lower case, punctuation dropped, spaces to hyphens. */
function anchorOf(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

/**
 * The metric names a PromQL expression reads: what is left once label matchers, ranges,
 * aggregation clauses, functions, keywords and numbers are taken out.
 */
export function metricNamesIn(expr: string): string[] {
  const bare = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, ' ')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ');
  const names = new Set<string>();
  for (const match of bare.matchAll(/[A-Za-z_:][A-Za-z0-9_:]*/g)) {
    const [name] = match;
    const followedByCall = /^\s*\(/.test(bare.slice((match.index ?? 0) + name.length));
    if (followedByCall || ['and', 'or', 'unless', 'bool', 'offset', 'inf', 'nan'].includes(name)) continue;
    names.add(name);
  }
  return [...names];
}

/** Every series name a Prometheus text page can hold: histograms' and summaries' with their suffixes. */
function seriesNames(page: string): Set<string> {
  const names = new Set<string>();
  for (const [, name, type] of page.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
    if (!name) continue;
    names.add(name);
    if (type === 'histogram') for (const s of ['_bucket', '_sum', '_count']) names.add(`${name}${s}`);
    if (type === 'summary') for (const s of ['_sum', '_count']) names.add(`${name}${s}`);
  }
  return names;
}

interface Dashboard {
  panels: Array<{ title: string; type: string; targets?: Array<{ expr: string }> }>;
  templating: { list: Array<{ definition?: string }> };
}

test('promtool accepts the rules, and each alert fires on its unit test’s series and stays quiet on the everyday ones', () => {
  const checked = promtool('check', 'rules', RULES);
  assert.equal(checked.status, 0, checked.output);
  assert.match(checked.output, new RegExp(`SUCCESS: ${alertRules().length} rules found`));

  const tested = promtool('test', 'rules', RULE_TESTS);
  assert.equal(tested.status, 0, tested.output);
  assert.match(tested.output, /SUCCESS/);

  // Each alert is tested firing (a case with expected alerts) and quiet (a case with none).
  const { tests } = parse(readFileSync(RULE_TESTS, 'utf8')) as {
    tests: Array<{ alert_rule_test: Array<{ alertname: string; exp_alerts: unknown[] }> }>;
  };
  const cases = tests.flatMap((t) => t.alert_rule_test);
  for (const { alert } of alertRules()) {
    const mine = cases.filter((c) => c.alertname === alert);
    assert.ok(
      mine.some((c) => c.exp_alerts.length > 0),
      `${alert} has a unit test where it fires`,
    );
    assert.ok(
      mine.some((c) => c.exp_alerts.length === 0),
      `${alert} has a unit test where it does not fire`,
    );
  }
});

test('every alert has a severity, a summary, a description and a runbook_url to its own section of docs/operations.md', () => {
  const anchors = new Set(
    [...readFileSync(RUNBOOK, 'utf8').matchAll(/^#{2,4} (.+)$/gm)].map(([, heading]) =>
      anchorOf(heading ?? ''),
    ),
  );
  const rules = alertRules();
  assert.ok(rules.length >= 12, `${rules.length} alerts`);
  for (const rule of rules) {
    assert.match(rule.labels?.severity ?? '', /^(critical|warning)$/, `${rule.alert}: severity`);
    assert.ok(rule.annotations?.summary, `${rule.alert}: summary`);
    assert.ok(rule.annotations?.description, `${rule.alert}: description`);
    const url = rule.annotations?.runbook_url ?? '';
    assert.equal(
      url,
      `${RUNBOOK_BASE}${RUNBOOK}#alert-${rule.alert.toLowerCase()}`,
      `${rule.alert}: runbook_url`,
    );
    assert.ok(
      anchors.has(`alert-${rule.alert.toLowerCase()}`),
      `${RUNBOOK} has a section "Alert: ${rule.alert}"`,
    );
  }
});

test('the rules and the dashboard name only metrics that the receiver and the worker serve on their /metrics', async (test) => {
  const t = cleanupScope(test);
  const redis = await privateRedis(t);
  const sim = await startSimulator(t);
  const config = loadConfig({
    REDIS_URL: redis.url,
    H2H_DB_PATH: tempDbPath(t),
    H2H_BASE_URL: sim.sim.baseUrl,
    H2H_API_KEY: sim.member.api_key,
    H2H_API_SECRET: SECRET,
    PORT: '0',
    H2H_RECEIVER_METRICS_PORT: String(await freePort()),
    ADMIN_PORT: String(await freePort()),
    LOG_LEVEL: 'silent',
  });
  const receiver = await startReceiver(receiverSettings(config));
  t.after(() => receiver.close());
  const worker = await startWorkerProcess(config, { admin: true });
  t.after(() => worker.close());
  assert.ok(receiver.metricsUrl && worker.admin);

  const exported = new Set<string>();
  for (const url of [receiver.metricsUrl, `${worker.admin.url}/metrics`]) {
    const page = await fetch(url);
    assert.equal(page.status, 200, url);
    for (const name of seriesNames(await page.text())) exported.add(name);
  }
  // The scrape was read, not guessed: both processes' own series are there.
  assert.ok(exported.has('h2h_webhook_requests_total') && exported.has('h2h_reconcile_polls_total'));

  const named = new Map<string, string>();
  for (const rule of alertRules()) {
    for (const name of metricNamesIn(rule.expr)) named.set(name, `rule ${rule.alert}`);
  }
  const dashboard = JSON.parse(readFileSync(DASHBOARD, 'utf8')) as Dashboard;
  let panelsWithQueries = 0;
  for (const panel of dashboard.panels) {
    if (panel.type === 'row') continue;
    assert.ok(panel.targets?.length, `panel "${panel.title}" has a query`);
    panelsWithQueries++;
    for (const { expr } of panel.targets ?? []) {
      for (const name of metricNamesIn(expr)) named.set(name, `panel "${panel.title}"`);
    }
  }
  for (const variable of dashboard.templating.list) {
    const metric = /label_values\(\s*([A-Za-z_:][A-Za-z0-9_:]*)/.exec(variable.definition ?? '')?.[1];
    if (metric) named.set(metric, 'a dashboard variable');
  }
  assert.ok(
    panelsWithQueries >= 10 && named.size >= 20,
    `${panelsWithQueries} panels, ${named.size} metrics`,
  );

  const unknown = [...named].filter(([name]) => !exported.has(name) && !PROMETHEUS_OWN.has(name));
  assert.deepEqual(
    unknown.map(([name, where]) => `${name} (${where})`),
    [],
    'metrics no h2h-sync process exports',
  );
});

test('metricNamesIn reads the metric names of an expression, not its labels, functions or keywords', () => {
  assert.deepEqual(
    metricNamesIn(
      'sum by (queue) (rate(h2h_a_total{outcome=~"x|y"}[10m])) / on (queue) max(h2h_b) > 0.5 and h2h_c_bucket unless up{job="h2h"} == bool 1',
    ).sort(),
    ['h2h_a_total', 'h2h_b', 'h2h_c_bucket', 'up'],
  );
});
