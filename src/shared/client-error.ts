import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';

/** What Node refused before any route ran, as an HTTP status. */
export type ClientErrorKind = 'timeout' | 'headers_too_large' | 'bad_request';

/** The JSON answer of a refusal: its status and body. */
export interface ClientErrorAnswer {
  status: number;
  body: unknown;
}

function kindOf(error: NodeJS.ErrnoException): ClientErrorKind {
  if (error.code === 'ERR_HTTP_REQUEST_TIMEOUT') return 'timeout';
  if (error.code === 'HPE_HEADER_OVERFLOW') return 'headers_too_large';
  return 'bad_request';
}

/**
 * A handler for Node's `clientError` (Fastify's `clientErrorHandler` option): requests Node
 * refuses before Fastify sees them (unparseable framing, headers over the limit, a request not
 * received within the time-out). Each gets `answer(kind)` as JSON, and its connection is closed.
 *
 * The error is logged by its code only, never itself: Node hangs the raw bytes received on it
 * (`rawPacket`), credentials included (Fastify's default handler logs it whole at `trace`).
 */
export function jsonClientErrorHandler(
  answer: (kind: ClientErrorKind, error: NodeJS.ErrnoException) => ClientErrorAnswer,
  logger?: Logger,
): (error: NodeJS.ErrnoException, socket: Duplex) => void {
  return (error, socket) => {
    if (error.code === 'ECONNRESET' || socket.destroyed) return;
    const kind = kindOf(error);
    logger?.debug({ code: error.code, kind }, 'request refused before routing');
    if (!socket.writable) {
      socket.destroy();
      return;
    }
    const { status, body } = answer(kind, error);
    const text = JSON.stringify(body);
    socket.end(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json; charset=utf-8\r\n` +
        `Content-Length: ${Buffer.byteLength(text)}\r\nConnection: close\r\n\r\n${text}`,
      () => socket.destroy(),
    );
  };
}

/** The HTTP status of each kind, for handlers that only need the code. */
export const CLIENT_ERROR_STATUS: Record<ClientErrorKind, number> = {
  timeout: 408,
  headers_too_large: 431,
  bad_request: 400,
};
