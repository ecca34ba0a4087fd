import { randomUUID } from 'node:crypto';
import { Agent } from 'undici';
import type { NotifyEndpoint } from '../store/notify-endpoints.js';
import { notificationBody, type PostResult, sendNotification } from './post-notification.js';
import { DEFAULT_NOTIFY_TIMEOUT_MS } from './settings.js';

/**
 * `h2h-sync endpoints test ID` (docs/cli.md; docs/shop.md, "Five commands", step 5): one
 * notification of type {@link TEST_EVENT_TYPE}, signed and POSTed exactly as the notifier sends
 * an order's (the endpoint's secrets, two during a rotation; the same headers, client and time
 * limit), now, whatever the endpoint's event filter or state. It is no event of the change feed:
 * nothing is written to the store (no outbox row, no delivery history), and it is never retried.
 */

/** The type of the test notification; a shop answers 2xx to types it does not handle. */
export const TEST_EVENT_TYPE = 'endpoint.test';

/** What the endpoint's answer means, when it is not a 2xx: a stable code and the fix. */
export interface EndpointTestProblem {
  code:
    | 'ENDPOINT_UNREACHABLE'
    | 'ENDPOINT_REDIRECTED'
    | 'ENDPOINT_GONE'
    | 'ENDPOINT_REFUSED'
    | 'ENDPOINT_FAILED';
  message: string;
  fix: string;
}

/** What one test notification came to. Times in ms, named `…At`, for the CLI's public form. */
export interface EndpointTestResult {
  endpointId: number;
  url: string;
  state: 'enabled' | 'disabled';
  /** `test_<uuid>`: never an event's `evt_<seq>`, new on every test, so no shop dedupes it away. */
  webhookId: string;
  type: typeof TEST_EVENT_TYPE;
  sentAt: number;
  /** The answer's HTTP status; null when none came. */
  status: number | null;
  durationMs: number;
  /** True on a 2xx answer. */
  ok: boolean;
  error: EndpointTestProblem | null;
}

const VERIFY_FIX =
  'verify the signature with this endpoint\'s secret (the whsec_ printed by `endpoints add` or `rotate-secret`) over the raw body bytes, and answer 2xx to event types you do not handle (docs/shop.md, "Verifying a notification")';

/** Reads the endpoint's answer as a shop developer needs it: null for a 2xx, else what to fix. */
export function endpointTestProblem(
  url: string,
  answer: PostResult,
  timeoutMs: number,
): EndpointTestProblem | null {
  const { status, error } = answer;
  if (status === null) {
    const reason = error ?? 'no answer';
    const fix = reason.startsWith('no answer within')
      ? `answer within H2H_NOTIFY_TIMEOUT_MS (${timeoutMs} ms): reply 2xx first, then do the work`
      : reason.startsWith('ECONNREFUSED')
        ? `nothing listens at ${url}: start the shop's server, or add the endpoint with its right URL (\`endpoints add\`) and disable this one`
        : `check that this machine reaches ${url} (its host name, port and TLS certificate: curl -v ${url})`;
    return { code: 'ENDPOINT_UNREACHABLE', message: `no answer from ${url}: ${reason}`, fix };
  }
  if (status >= 200 && status < 300) return null;
  const answered = `${url} answered ${status}`;
  if (status >= 300 && status < 400) {
    return {
      code: 'ENDPOINT_REDIRECTED',
      message: `${answered}: redirects are not followed`,
      fix: 'add the endpoint with the URL the redirect points to (`endpoints add URL`) and disable this one',
    };
  }
  if (status === 410) {
    return {
      code: 'ENDPOINT_GONE',
      message: `${answered} Gone: a notification answered 410 disables the endpoint`,
      fix: 'answer 2xx at this URL, or disable the endpoint (`endpoints disable ID`) if the shop no longer wants notifications',
    };
  }
  if (status === 404 || status === 405) {
    return {
      code: 'ENDPOINT_REFUSED',
      message: `${answered}: nothing handles POST there`,
      fix: "route POST at this path to the shop's handler, or add the endpoint with the handler's URL",
    };
  }
  if (status < 500) {
    return {
      code: 'ENDPOINT_REFUSED',
      message: `${answered}: the shop refused the notification`,
      fix: VERIFY_FIX,
    };
  }
  return {
    code: 'ENDPOINT_FAILED',
    message: `${answered}: the shop's handler failed`,
    fix: "see the shop's logs; a real notification answered so is retried (H2H_NOTIFY_RETRY_S)",
  };
}

/** The test notification's body: a notification's, of an event of no order, `{type, timestamp, data}`. */
export function testNotificationBody(endpoint: NotifyEndpoint, at: number): string {
  return notificationBody({
    type: TEST_EVENT_TYPE,
    timestamp: new Date(at).toISOString(),
    data: {
      endpoint_id: endpoint.id,
      message: 'a test notification from `h2h-sync endpoints test`: no order changed; answer 2xx',
    },
  });
}

/**
 * Sends one test notification to `endpoint` now and reads its answer (never throws for the
 * endpoint's failure: that is the result). `timeoutMs` is the notifier's (H2H_NOTIFY_TIMEOUT_MS);
 * `now` the clock that stamps and signs it.
 */
export async function sendTestNotification(
  endpoint: NotifyEndpoint,
  { timeoutMs = DEFAULT_NOTIFY_TIMEOUT_MS, now = Date.now }: { timeoutMs?: number; now?: () => number } = {},
): Promise<EndpointTestResult> {
  const sentAt = now();
  const webhookId = `test_${randomUUID()}`;
  const agent = new Agent({ connect: { timeout: timeoutMs } });
  try {
    const answer = await sendNotification(endpoint, webhookId, testNotificationBody(endpoint, sentAt), {
      at: sentAt,
      timeoutMs,
      dispatcher: agent,
    });
    const error = endpointTestProblem(endpoint.url, answer, timeoutMs);
    return {
      endpointId: endpoint.id,
      url: endpoint.url,
      state: endpoint.disabledAt === null ? 'enabled' : 'disabled',
      webhookId,
      type: TEST_EVENT_TYPE,
      sentAt,
      status: answer.status,
      durationMs: answer.durationMs,
      ok: error === null,
      error,
    };
  } finally {
    await agent.destroy().catch(() => undefined);
  }
}
