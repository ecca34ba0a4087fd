import { DEFAULT_TOLERANCE_S } from '../upstream/signature.js';
import { parseUpstreamTime } from '../upstream/upstream-time.js';

/**
 * Whose order an upstream answer is (decisions.md, "Whose order is it"). The upstream answers a
 * create with a used `partner_ref` with the order that already has it, whatever the body (spec §4
 * rule 2), and a read by that ref with it too. When the ref was used upstream before (a store
 * restored from an old backup, two deployments on one key, a shop whose refs restart at
 * `order-1`), that order is somebody else's: taking its product, target and status would tell the
 * shop an outcome its order never had. So before an answer adopts an order we have not seen
 * accepted yet, it is compared with what we sent.
 */

/** The code an order gets when its partner_ref names another order upstream. */
export const PARTNER_REF_REUSED = 'PARTNER_REF_REUSED';

/**
 * How far the upstream's clock may be behind ours before an order it says was created before our
 * first create was sent counts as another order's: the webhook timestamp tolerance's default
 * (300 s), the clock skew h2h-sync tolerates everywhere.
 */
export const CLOCK_SKEW_TOLERANCE_MS = DEFAULT_TOLERANCE_S * 1000;

/** What we know of our own order. */
export interface OurOrder {
  /** The target data we sent (or will send); null for an order placed elsewhere. */
  data: Readonly<Record<string, string>> | null;
  /** The catalog's name of the product we asked for, when the catalog knows it. */
  productName: string | null;
  /** When our first create was sent, in ms on our clock; null when not known. */
  firstSentAt: number | null;
  /** Never sent (still queued, or cancelled while queued): no answer can be of it. */
  neverSent: boolean;
}

/** What the answer says of the order it carries (the spec's fields; any may be absent). */
export interface AnsweredOrder {
  target: string | null;
  product_name: string | null;
  /** ISO 8601; without an offset it is UTC (spec §2). */
  created_at: string | null;
}

/**
 * The target the upstream derives from our data (spec §2: the game user id followed by the server
 * id in parentheses), or null when our data has no `user_id` and the rendering is not known.
 */
export function expectedTarget(data: Readonly<Record<string, string>>): string | null {
  const userId = data.user_id;
  if (userId === undefined || userId === '') return null;
  const serverId = data.server_id;
  return serverId === undefined || serverId === '' ? userId : `${userId}(${serverId})`;
}

/** Case and white space do not tell two texts apart. */
const loose = (text: string) => text.replace(/\s+/g, '').toLowerCase();

/** A target as compared: lower case, no white space around its parentheses, runs of it one space. */
const targetText = (text: string) =>
  text
    .trim()
    .toLowerCase()
    .replace(/\s*([()])\s*/g, '$1')
    .replace(/\s+/g, ' ');

/**
 * Whether the upstream's `target` is the one our data gives: equal, or ours followed by more (a
 * nickname the upstream may append) after its closing parenthesis or a character that is no
 * letter or digit. Lenient on purpose: a false "not ours" would reject an order the upstream did
 * place and debit.
 */
function sameTarget(answered: string, expected: string): boolean {
  const a = targetText(answered);
  const e = targetText(expected);
  if (a === e) return true;
  return a.startsWith(e) && (e.endsWith(')') || !/[\p{L}\p{N}]/u.test(a.charAt(e.length)));
}

/**
 * Why `answer` is another order than ours, in words for the operator, or null when nothing says
 * so. It is another order when its target differs from the one our data gives, its product name
 * differs from the catalog's name of our product (when both are known), our order was never sent
 * (still queued), or it was created before our first create was sent by more than
 * {@link CLOCK_SKEW_TOLERANCE_MS}.
 */
export function otherOrderReason(ours: OurOrder, answer: AnsweredOrder): string | null {
  const expected = ours.data === null ? null : expectedTarget(ours.data);
  // An upstream may render the user id alone for a product that takes no server id.
  const userOnly = ours.data?.user_id ?? null;
  if (
    expected !== null &&
    answer.target !== null &&
    !sameTarget(answer.target, expected) &&
    !(userOnly !== null && targetText(answer.target) === targetText(userOnly))
  ) {
    return `its target is ${answer.target}, ours ${expected}`;
  }
  if (
    ours.productName !== null &&
    answer.product_name !== null &&
    loose(ours.productName) !== loose(answer.product_name)
  ) {
    return `its product is ${answer.product_name}, ours ${ours.productName}`;
  }
  if (ours.neverSent) return 'our order was never sent: it still waits in the submission queue';
  const createdAt = answer.created_at === null ? Number.NaN : parseUpstreamTime(answer.created_at);
  if (ours.firstSentAt !== null && createdAt < ours.firstSentAt - CLOCK_SKEW_TOLERANCE_MS) {
    return `it was created at ${answer.created_at}, before our first create (${new Date(ours.firstSentAt).toISOString()})`;
  }
  return null;
}
