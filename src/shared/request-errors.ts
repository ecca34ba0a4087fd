/**
 * What was wrong with a request that Fastify refused after routing (its body, its content type),
 * for the receiver and the shop API alike: each app answers the kind in its own documented error
 * shape (docs/receiver.md, docs/api.md "Errors"), with the same detail, never Fastify's own text.
 */

/** The kinds of refusal that are the request's fault. */
export type RequestErrorKind =
  | 'body_not_json'
  | 'payload_too_large'
  | 'unsupported_media_type'
  | 'bad_request';

export interface RequestError {
  kind: RequestErrorKind;
  status: 400 | 413 | 415;
  /** What was wrong and how to fix it. */
  detail: string;
}

/** The fix of a body in the wrong content type: both apps take JSON only. */
export const SEND_JSON = 'send the body as Content-Type: application/json';

/**
 * A body given as JSON that does not parse (or carries a `__proto__` key, refused as prototype
 * poisoning): thrown by a JSON parser such as {@link jsonBodyParser}.
 */
export class BodyNotJsonError extends Error {
  override name = 'BodyNotJsonError';
  readonly statusCode = 400;
  readonly code = 'BODY_NOT_JSON';
}

/**
 * What `error` (a Fastify error, or one a parser or hook threw) says about the request, or
 * undefined when it is no fault of the request's (a failure of ours: a 5xx). `bodyLimit`, in
 * bytes, is named in the detail of a body over it.
 */
export function requestErrorOf(
  error: { statusCode?: number; code?: string; message: string },
  bodyLimit: number,
): RequestError | undefined {
  const status = error.statusCode ?? 500;
  if (error instanceof BodyNotJsonError) {
    return {
      kind: 'body_not_json',
      status: 400,
      detail: `the body is not JSON (${error.message}): send a JSON object with Content-Type: application/json`,
    };
  }
  if (status === 413) {
    return { kind: 'payload_too_large', status, detail: `the body is over the limit of ${bodyLimit} bytes` };
  }
  if (status === 415) return { kind: 'unsupported_media_type', status, detail: SEND_JSON };
  if (status >= 400 && status < 500) return { kind: 'bad_request', status: 400, detail: error.message };
  return undefined;
}

type ParserDone = (error: Error | null, value?: unknown) => void;

/**
 * A Fastify parser (`addContentTypeParser(type, { parseAs: 'string' }, parser)`) of a JSON body
 * through `parse` (Fastify's own, which refuses prototype poisoning): an empty body is no body (a
 * client that sends `Content-Type: application/json` on every POST, even without a body), and one
 * that does not parse is a {@link BodyNotJsonError} naming why.
 */
export function jsonBodyParser<R>(parse: (request: R, body: string, done: ParserDone) => void) {
  return (request: R, body: string | Buffer, done: ParserDone) => {
    const text = body.toString();
    if (text.trim() === '') return done(null, undefined);
    parse(request, text, (error, value) => {
      if (!error) return done(null, value);
      done(new BodyNotJsonError(whyNotJson(text)), undefined);
    });
  };
}

function whyNotJson(text: string): string {
  try {
    JSON.parse(text);
    return 'it has a __proto__ or constructor.prototype key, refused as prototype poisoning';
  } catch (error) {
    return (error as Error).message;
  }
}
