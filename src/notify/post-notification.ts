import { type Dispatcher, getGlobalDispatcher, request } from 'undici';
import type { FeedEvent } from '../store/feed.js';
import { type NotifyEndpoint, signingSecrets } from '../store/notify-endpoints.js';
import { signNotification } from './signature.js';

/** A feed event, or the test notification's: no `seq`, its own type and data, a feed event's other fields. */
export type NotificationEvent =
  | FeedEvent
  | (Omit<FeedEvent, 'seq' | 'type' | 'data'> & { type: string; data: Record<string, unknown> });

/** The body: the event but its `seq` (in `webhook-id`): `{type, timestamp, previous_status, data}`. */
export function notificationBody(event: NotificationEvent): string {
  return JSON.stringify({ ...event, seq: undefined });
}

/** The message id of an event, the same on every attempt and resend: receivers dedupe on it. */
export const notificationId = (seq: number): string => `evt_${seq}`;

/** The most of an answer's body read (and dropped) before the connection is given up instead. */
const MAX_ANSWER_BYTES = 65_536;

/** What one POST to an endpoint came to. */
export interface PostResult {
  /** The answer's HTTP status; null when none came in time. */
  status: number | null;
  durationMs: number;
  /** Why no answer came (time-out, refused, reset); null when one did. */
  error: string | null;
}

/**
 * POSTs `body` to `url` with `headers` and reads the answer, all within `timeoutMs`. Never throws:
 * a failure to get an answer is a result with its reason. An answer counts by its status; its
 * body is read and dropped (up to 64 KiB; past that the connection is closed instead of reused),
 * and a body that does not finish in time does not take the status back.
 */
export async function postNotification(
  url: string,
  headers: Record<string, string>,
  body: string,
  { timeoutMs, dispatcher = getGlobalDispatcher() }: { timeoutMs: number; dispatcher?: Dispatcher },
): Promise<PostResult> {
  const started = performance.now();
  const durationMs = () => Math.round(performance.now() - started);
  const signal = AbortSignal.timeout(timeoutMs);
  try {
    const answer = await request(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body,
      dispatcher,
      signal,
    });
    await answer.body.dump({ limit: MAX_ANSWER_BYTES, signal }).catch(() => {});
    return { status: answer.statusCode, durationMs: durationMs(), error: null };
  } catch (err) {
    const e = err as Error & { code?: string; cause?: { code?: string; message?: string } };
    const error = signal.aborted
      ? `no answer within ${timeoutMs} ms (H2H_NOTIFY_TIMEOUT_MS)`
      : `${e.cause?.code ?? e.code ?? e.name}: ${e.cause?.message ?? e.message}`;
    return { status: null, durationMs: durationMs(), error };
  }
}

/**
 * Signs `body` with `endpoint`'s secrets at `at` (ms; two during a rotation) as message `id` and
 * POSTs it to the endpoint ({@link postNotification}).
 */
export function sendNotification(
  endpoint: NotifyEndpoint,
  id: string,
  body: string,
  { at, ...options }: { at: number; timeoutMs: number; dispatcher: Dispatcher },
): Promise<PostResult> {
  const headers = signNotification(signingSecrets(endpoint, at), id, Math.floor(at / 1000), body);
  return postNotification(endpoint.url, { ...headers }, body, options);
}
