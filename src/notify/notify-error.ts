/** Why a notification command was refused; each message names the fix. */
export type NotifyErrorCode =
  /** The URL is not an absolute http(s) URL. */
  | 'INVALID_ENDPOINT_URL'
  /** An event pattern names no event type we send. */
  | 'INVALID_EVENT_FILTER'
  /** No endpoint has that id. */
  | 'ENDPOINT_NOT_FOUND'
  /** `--since` is not an ISO 8601 time. */
  | 'INVALID_SINCE'
  /** `--from-seq`/`--to-seq` is not a feed sequence number, or they are the wrong way round. */
  | 'INVALID_SEQ'
  /** `notifications resend` without `--since` or `--from-seq`. */
  | 'RESEND_RANGE_MISSING';

export class NotifyError extends Error {
  override readonly name = 'NotifyError';

  constructor(
    readonly code: NotifyErrorCode,
    message: string,
  ) {
    super(message);
  }
}
