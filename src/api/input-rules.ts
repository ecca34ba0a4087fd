/**
 * What the text of a shop API request may hold (docs/api.md, "What refs and data may contain"),
 * checked at the edge before a route reads it, so both store backends are only given text they
 * keep alike: PostgreSQL refuses U+0000 in text where SQLite stores it, and the two turn a lone
 * surrogate into different replacement text.
 */

/**
 * The largest `after` of GET /v1/events: 2^53 − 1, the largest seq a JSON number carries
 * exactly (the feed's BIGINT holds more, but no reader could name it).
 */
export const MAX_FEED_SEQ = Number.MAX_SAFE_INTEGER;

/**
 * A control character (Unicode category Cc: U+0000–U+001F, U+007F and the C1 controls
 * U+0080–U+009F) or a lone UTF-16 surrogate (Cs: not well-formed Unicode). No ref, product code
 * or game id holds one; a C1 control is usually text decoded with the wrong charset.
 */
const REFUSED_CHARACTER = /[\p{Cc}\p{Cs}]/u;

const FIX = 'send printable text only (docs/api.md, "What refs and data may contain")';

/** What is wrong with `text`, naming the first refused character and where it is; undefined when fine. */
export function textProblem(text: string): string | undefined {
  const match = REFUSED_CHARACTER.exec(text);
  if (!match) return undefined;
  const codePoint = match[0].codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0');
  const kind = /\p{Cs}/u.test(match[0]) ? 'a lone surrogate' : 'the control character';
  return `contains ${kind} U+${codePoint} at character ${[...text.slice(0, match.index)].length + 1}`;
}

/** The first refused text under `value` (object keys included), as `field: problem`. */
function firstProblem(field: string, value: unknown): string | undefined {
  if (typeof value === 'string') {
    const problem = textProblem(value);
    return problem && `${field || 'the body'}: ${problem}`;
  }
  if (value === null || typeof value !== 'object') return undefined;
  for (const [key, inner] of Object.entries(value)) {
    const keyProblem = textProblem(key);
    if (keyProblem) return `${field || 'the body'}: a key ${keyProblem}`;
    const name = Array.isArray(value) ? field : field ? `${field}.${key}` : key;
    const problem = firstProblem(name, inner);
    if (problem) return problem;
  }
  return undefined;
}

/**
 * Why a request must be refused for its text, or undefined: the first control character or lone
 * surrogate in its path parameters (`:ref`), its query (any parameter) or its JSON body (any
 * string, and every key, e.g. of `data`), named by field (`partner_ref`, `data.user_id`, `ref`)
 * with the fix.
 */
export function requestTextProblem(request: {
  params: unknown;
  query: unknown;
  body: unknown;
}): string | undefined {
  const problem =
    firstProblem('', request.params) ?? firstProblem('', request.query) ?? firstProblem('', request.body);
  return problem && `${problem}: ${FIX}`;
}
