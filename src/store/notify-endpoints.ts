import { dropEndpointRows } from './notify-outbox.js';
import type { StoreContext } from './store-context.js';

/**
 * The shop's notification endpoints (docs/api.md, "Notifications"): where the change feed is
 * pushed, which event types each wants, the secret that signs its deliveries (two during a
 * rotation) and its cursor in the feed, which moves in the transaction that adds the events up to
 * it to the outbox (notify-outbox.ts).
 */

/** One endpoint, as the store keeps it. */
export interface NotifyEndpoint {
  id: number;
  url: string;
  /** Event type patterns (`order.updated`, `order.*`, `*`). */
  events: string[];
  /** The current signing secret (`whsec_` + base64). */
  secret: string;
  /** The secret before the last rotation, still signing until `previousSecretUntil`; else null. */
  previousSecret: string | null;
  previousSecretUntil: number | null;
  createdAt: number;
  /** When it was disabled (`endpoints disable`, or a 410 answer); null while enabled. */
  disabledAt: number | null;
  disabledReason: string | null;
  /**
   * The feed's newest `seq` when the endpoint was added or last enabled: it is sent the events
   * after it (older ones only by `notifications resend`).
   */
  fromSeq: number;
  /** The last feed `seq` added to the outbox (when the endpoint wanted it). */
  cursor: number;
}

interface EndpointRow {
  id: number;
  url: string;
  events: string;
  secret: string;
  previous_secret: string | null;
  previous_secret_until: number | null;
  created_at: number;
  disabled_at: number | null;
  disabled_reason: string | null;
  from_seq: number;
  cursor: number;
}

function toEndpoint(row: EndpointRow): NotifyEndpoint {
  return {
    id: row.id,
    url: row.url,
    events: JSON.parse(row.events) as string[],
    secret: row.secret,
    previousSecret: row.previous_secret,
    previousSecretUntil: row.previous_secret_until,
    createdAt: row.created_at,
    disabledAt: row.disabled_at,
    disabledReason: row.disabled_reason,
    fromSeq: row.from_seq,
    cursor: row.cursor,
  };
}

/** The secrets that sign a delivery at `now`: the current one, then the previous during its grace. */
export function signingSecrets(endpoint: NotifyEndpoint, now: number): string[] {
  const { secret, previousSecret, previousSecretUntil } = endpoint;
  return previousSecret && previousSecretUntil !== null && previousSecretUntil > now
    ? [secret, previousSecret]
    : [secret];
}

/** What {@link NotifyEndpoints.enable} did: the endpoint, and the events it missed while disabled. */
export interface EnableOutcome {
  endpoint: NotifyEndpoint;
  /** False when it was enabled already (nothing changed). */
  changed: boolean;
  /**
   * The feed range not sent to it while it was disabled (`fromSeq`..`toSeq`, inclusive), which
   * `notifications resend --endpoint ID --from-seq … --to-seq …` sends; null when none.
   */
  missed: { fromSeq: number; toSeq: number } | null;
}

export class NotifyEndpoints {
  readonly #context: StoreContext;

  constructor(context: StoreContext) {
    this.#context = context;
  }

  /** Adds an enabled endpoint whose cursor is the feed's newest event. */
  async add(input: { url: string; events: readonly string[]; secret: string }): Promise<NotifyEndpoint> {
    // A new endpoint starts at the feed's newest event: it is sent what changes from now on.
    const inserted = await this.#context.db.write((tx) =>
      tx.get<{ id: number }>(
        `INSERT INTO notify_endpoints (url, events, secret, created_at, from_seq, cursor)
         SELECT @url, @events, @secret, @now, last, last
         FROM (SELECT COALESCE(MAX(seq), 0) AS last FROM feed_events) AS feed
         RETURNING id`,
        {
          url: input.url,
          events: JSON.stringify(input.events),
          secret: input.secret,
          now: this.#context.now(),
        },
      ),
    );
    return (await this.get(inserted!.id))!;
  }

  async get(id: number): Promise<NotifyEndpoint | undefined> {
    const row = await this.#context.db.get<EndpointRow>('SELECT * FROM notify_endpoints WHERE id = @id', {
      id,
    });
    return row ? toEndpoint(row) : undefined;
  }

  /** Every endpoint, enabled or not, oldest first. */
  async list(): Promise<NotifyEndpoint[]> {
    return (await this.#context.db.all<EndpointRow>('SELECT * FROM notify_endpoints ORDER BY id')).map(
      toEndpoint,
    );
  }

  /** The endpoints the notifier serves. */
  async enabled(): Promise<NotifyEndpoint[]> {
    return (await this.list()).filter((e) => e.disabledAt === null);
  }

  /**
   * Disables an endpoint (a second disable keeps the first time and reason) and drops its
   * notifications still in the outbox, each recorded `skipped`, in one transaction; undefined
   * when unknown.
   */
  async disable(id: number, reason: string): Promise<NotifyEndpoint | undefined> {
    await this.#context.db.write(async (tx) => {
      const now = this.#context.now();
      const { changes } = await tx.run(
        `UPDATE notify_endpoints SET disabled_at = @now, disabled_reason = @reason
         WHERE id = @id AND disabled_at IS NULL`,
        { id, now, reason },
      );
      if (changes === 1) await dropEndpointRows(tx, id, now);
    });
    return this.get(id);
  }

  /**
   * Enables a disabled endpoint again, from the feed's newest event on (its `fromSeq` and cursor
   * move there), and says what it missed while disabled; an enabled one is left as it is
   * (`changed` false). Undefined when unknown.
   *
   * The read of the endpoint, the enable and the read of the first event not sent to it are one
   * write transaction: no event or delivery record committed in between can be both left out of
   * the new `fromSeq` and out of `missed` (or in both), and of two enables at once only one
   * changes it.
   */
  async enable(id: number): Promise<EnableOutcome | undefined> {
    return this.#context.db.write(async (tx) => {
      // Locked (PostgreSQL; SQLite's BEGIN IMMEDIATE is the lock already): a second enable at
      // once waits here and then reads the endpoint enabled, instead of enabling it again.
      const row = await tx.get<EndpointRow>(
        `SELECT * FROM notify_endpoints WHERE id = @id ${tx.dialect.forUpdate}`,
        { id },
      );
      if (!row) return undefined;
      const before = toEndpoint(row);
      if (before.disabledAt === null) return { endpoint: before, changed: false, missed: null };
      // Enabled again, it starts afresh at the feed's newest event, as if just added: what was
      // committed while it was disabled is not queued (docs/api.md, "Enabling an endpoint again").
      const after = (await tx.get<EndpointRow>(
        `UPDATE notify_endpoints
         SET disabled_at = NULL, disabled_reason = NULL,
             from_seq = (SELECT COALESCE(MAX(seq), 0) FROM feed_events),
             cursor = (SELECT COALESCE(MAX(seq), 0) FROM feed_events)
         WHERE id = @id
         RETURNING *`,
        { id },
      ))!;
      const endpoint = toEndpoint(after);
      // Missed: the events after its old cursor (not queued while disabled), and before them any
      // event whose latest attempt there says it was not sent because it was disabled (a 410
      // answer, or skipped) or was to be tried again when its row was dropped (a delivery that
      // failed while the endpoint was being disabled).
      const unsent = await tx.get<{ seq: number | null }>(
        `SELECT MIN(d.seq) AS seq FROM notify_deliveries d
         WHERE d.endpoint_id = @id AND d.seq > @after AND d.outcome IN ('disabled', 'skipped', 'retrying')
           AND d.id = (SELECT MAX(id) FROM notify_deliveries
                       WHERE endpoint_id = d.endpoint_id AND seq = d.seq)`,
        { id, after: before.fromSeq },
      );
      const notQueued = before.cursor + 1;
      const fromSeq = Math.min(notQueued, unsent?.seq ?? notQueued);
      const missed = fromSeq <= endpoint.fromSeq ? { fromSeq, toSeq: endpoint.fromSeq } : null;
      return { endpoint, changed: true, missed };
    });
  }

  /**
   * Makes `secret` the signing secret; the current one keeps signing beside it for `graceMs`
   * (two signatures in `webhook-signature`). Undefined when the endpoint is unknown.
   */
  async rotateSecret(id: number, secret: string, graceMs: number): Promise<NotifyEndpoint | undefined> {
    const until = this.#context.now() + graceMs;
    await this.#context.db.run(
      `UPDATE notify_endpoints
       SET previous_secret = secret, previous_secret_until = @until, secret = @secret
       WHERE id = @id`,
      { id, secret, until },
    );
    return this.get(id);
  }
}
