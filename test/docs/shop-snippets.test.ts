import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { generateEndpointSecret } from '../../src/notify/signature.js';
import { sendTestNotification } from '../../src/notify/test-notification.js';
import { spawnProcess } from '../helpers/cli.js';
import { liveOrder, notifySetup, startTestNotifier } from '../helpers/notify.js';
import type { WebhookDelivery } from '../helpers/webhook-sink.js';

/**
 * docs/shop.md's PHP and Python verification snippets, taken from the doc itself (so the doc and
 * this test cannot drift) and run as a shop runs them (`php`, `python3`; scripts/setup.sh installs
 * php-cli), on real notifications of h2h-sync's notifier captured by a server on 127.0.0.1.
 */

const LANGUAGES = ['php', 'python'] as const;
type Language = (typeof LANGUAGES)[number];

/** The one fenced block of `language` in docs/shop.md that defines the verification function. */
function snippetOf(language: Language): string {
  const doc = readFileSync('docs/shop.md', 'utf8');
  const blocks = [...doc.matchAll(/^```(\w+)\n([\s\S]*?)^```$/gm)]
    .filter((match) => match[1] === language)
    .map((match) => match[2]!);
  assert.equal(blocks.length, 1, `docs/shop.md has one \`\`\`${language} block`);
  return blocks[0]!;
}

/** Calls the snippet's function with a notification's secret, headers and body, and reads the verdict. */
const DRIVERS: Record<Language, { command: string; file: string; driver: string }> = {
  php: {
    command: 'php',
    file: 'snippet.php',
    driver: `<?php
require $argv[1];
$input = json_decode(stream_get_contents(STDIN), true);
try {
    $event = h2h_verify_notification($input['secret'], $input['headers'], base64_decode($input['body']));
    echo json_encode(['accepted' => true, 'event' => $event]);
} catch (UnexpectedValueException $e) {
    echo json_encode(['accepted' => false, 'reason' => $e->getMessage()]);
}
`,
  },
  python: {
    command: 'python3',
    file: 'snippet.py',
    driver: `import base64, importlib.util, json, sys
spec = importlib.util.spec_from_file_location("snippet", sys.argv[1])
snippet = importlib.util.module_from_spec(spec)
spec.loader.exec_module(snippet)
given = json.load(sys.stdin)
try:
    event = snippet.verify_notification(given["secret"], given["headers"], base64.b64decode(given["body"]))
    print(json.dumps({"accepted": True, "event": event}))
except snippet.InvalidNotification as error:
    print(json.dumps({"accepted": False, "reason": str(error)}))
`,
  },
};

interface Verdict {
  accepted: boolean;
  reason?: string;
  event?: { type: string; data: { partner_ref?: string; endpoint_id?: number } };
}

/** What a shop's server hands the function: the headers as a PHP or WSGI server names them (any case) and the raw bytes. */
interface Notification {
  headers: Record<string, string>;
  body: Buffer;
}

function captured(delivery: WebhookDelivery): Notification {
  const header = (name: string) => String(delivery.headers[name]);
  return {
    headers: {
      'Content-Type': header('content-type'),
      'Webhook-Id': header('webhook-id'),
      'Webhook-Timestamp': header('webhook-timestamp'),
      'Webhook-Signature': header('webhook-signature'),
    },
    body: delivery.rawBody,
  };
}

async function runSnippet(
  t: { after(fn: () => unknown): void },
  dir: string,
  language: Language,
  secret: string,
  notification: Notification,
): Promise<Verdict> {
  const { command, file } = DRIVERS[language];
  const run = spawnProcess(t, command, [join(dir, `driver-${file}`), join(dir, file)]);
  run.child.stdin.end(
    JSON.stringify({ secret, headers: notification.headers, body: notification.body.toString('base64') }),
  );
  const code = await run.exited.catch((err: Error) => {
    throw new Error(`${err.message}: run bash scripts/setup.sh`);
  });
  assert.equal(code, 0, `${command} ${file} failed: ${run.stderr()}${run.stdout()}`);
  return JSON.parse(run.stdout()) as Verdict;
}

test("docs/shop.md's PHP and Python snippets accept a genuine notification under either secret of a rotation, and reject a tampered body, a wrong secret and a stale timestamp", async (t) => {
  const { scope, store, sink, secret: oldSecret, endpoint } = await notifySetup(t);
  const dir = mkdtempSync(join(tmpdir(), 'h2h-shop-snippets-'));
  scope.after(() => rmSync(dir, { recursive: true, force: true }));
  for (const language of LANGUAGES) {
    const { file, driver } = DRIVERS[language];
    writeFileSync(join(dir, file), snippetOf(language));
    writeFileSync(join(dir, `driver-${file}`), driver);
  }

  // A rotation under way: every notification carries two signatures, the new secret's first.
  const newSecret = generateEndpointSecret();
  await store.endpoints.rotateSecret(endpoint.id, newSecret, 3_600_000);
  await startTestNotifier(scope, { store });
  await liveOrder(store, 'SHOP-1');
  const [delivery] = await sink.waitForDeliveries(() => true, 1);
  const genuine = captured(delivery!);
  assert.equal(genuine.headers['Webhook-Signature']!.split(' ').length, 2);

  const tampered = {
    ...genuine,
    body: Buffer.from(genuine.body.toString('utf8').replace('SHOP-1', 'SHOP-2')),
  };
  assert.notDeepEqual(tampered.body, genuine.body);

  // Signed genuinely, six minutes ago: only its age is wrong.
  const stalePost = await sendTestNotification((await store.endpoints.get(endpoint.id))!, {
    now: () => Date.now() - 6 * 60_000,
  });
  assert.equal(stalePost.status, 200);
  const stale = captured(sink.deliveries.find((d) => d.headers['webhook-id'] === stalePost.webhookId)!);

  for (const language of LANGUAGES) {
    for (const secret of [newSecret, oldSecret]) {
      const verdict = await runSnippet(scope, dir, language, secret, genuine);
      assert.equal(verdict.accepted, true, `${language} accepts the genuine one: ${verdict.reason}`);
      assert.equal(verdict.event?.type, 'order.submitted');
      assert.equal(verdict.event?.data.partner_ref, 'SHOP-1');
    }
    const forged = await runSnippet(scope, dir, language, newSecret, tampered);
    assert.equal(forged.accepted, false, `${language}: a tampered body`);
    assert.match(forged.reason!, /no signature matches/);
    const wrong = await runSnippet(scope, dir, language, generateEndpointSecret(), genuine);
    assert.equal(wrong.accepted, false, `${language}: a wrong secret`);
    assert.match(wrong.reason!, /no signature matches/);
    const old = await runSnippet(scope, dir, language, newSecret, stale);
    assert.equal(old.accepted, false, `${language}: a stale timestamp`);
    assert.match(old.reason!, /webhook-timestamp/);
  }
});
