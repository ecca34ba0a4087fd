import { type Dispatcher, request } from 'undici';

/** Default time a delivery may take, connection, answer headers and body together. */
export const DEFAULT_NOTIFY_TIMEOUT_MS = 15_000;

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
 * a failure to get an answer is a result with its reason. The answer body is read and dropped
 * (at most what arrives in time), so the connection can be reused.
 */
export async function postNotification(
  url: string,
  headers: Record<string, string>,
  body: string,
  { timeoutMs, dispatcher }: { timeoutMs: number; dispatcher?: Dispatcher },
): Promise<PostResult> {
  const started = performance.now();
  const elapsed = () => Math.round(performance.now() - started);
  const signal = AbortSignal.timeout(timeoutMs);
  try {
    const answer = await request(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body,
      signal,
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
      ...(dispatcher ? { dispatcher } : {}),
    });
    await answer.body.dump({ limit: 65_536, signal }).catch(() => {});
    return { status: answer.statusCode, durationMs: elapsed(), error: null };
  } catch (err) {
    const e = err as Error & { code?: string; cause?: { code?: string; message?: string } };
    const reason = signal.aborted
      ? `no answer within ${timeoutMs} ms (H2H_NOTIFY_TIMEOUT_MS)`
      : `${e.cause?.code ?? e.code ?? e.name}: ${e.cause?.message ?? e.message}`;
    return { status: null, durationMs: elapsed(), error: reason };
  }
}
