import {
  type ApplyOptions,
  type CreateLocalOrderInput,
  type FeedChange,
  ORDER_COLUMNS,
  planApply,
  planLocalOrder,
} from '../domain/apply-plan.js';
import {
  DEFAULT_FAILOVER_SETTINGS,
  type FailoverSettings,
  isEndedAttempt,
  planNextAttempt,
} from '../domain/attempts.js';
import { publish } from '../domain/feed-change.js';
import {
  type Cancellation,
  type NotCancellable,
  planCancel,
  planSettlement,
  type SettlementPlan,
  type SubmissionOutcome,
  whyNotCancellable,
} from '../domain/submission-plan.js';
import type { Order } from '../upstream/model.js';
import { DEFAULT_UPSTREAM } from '../upstream/model.js';
import { type OrderSnapshot, readOrderSnapshot } from '../upstream/order-snapshot.js';
import type { BalanceLedger } from './balance.js';
import type { ChangeFeed } from './feed.js';
import { type EventReason, type LocalOrder, type OrderRow, toLocalOrder } from './local-order.js';
import { countQueued } from './order-queries.js';
import type { PollPlans } from './poll-plans.js';
import type { Outcome, SqlExecutor, WriteOptions } from './sql/executor.js';
import { together } from './sql/together.js';
import type { StoreContext, StoredOrderRow } from './store-context.js';
import { StoreError } from './store-error.js';

export type { ApplyOptions, CreateLocalOrderInput } from '../domain/apply-plan.js';
export type { Cancellation, NotCancellable } from '../domain/submission-plan.js';

/** What {@link OrderWriter.cancelOrder} did: cancelled it now, or why not. */
export type CancelResult =
  | { cancelled: true; order: LocalOrder }
  | { cancelled: false; order: LocalOrder; why: NotCancellable };

/** What {@link OrderWriter.startSubmission} found before it marked the create as sent. */
export interface StartedSubmission {
  order: LocalOrder;
  /**
   * An earlier create of the order may have reached the upstream without a definite answer
   * (`create_in_doubt_at` was set, and no 404 read settled it since): a 4xx answer to this one
   * is then no rejection.
   */
  inDoubtBefore: boolean;
  /** The claim's lease, renewed by the start: it ends then (the store's clock). */
  leasedUntil: number;
}

export interface ApplyResult {
  order: LocalOrder;
  /** True when the event moved the order (or created it). */
  changed: boolean;
  reason: EventReason;
  /** True when (source, upstream, eventId) had been applied before: nothing was recorded. */
  duplicate: boolean;
  /** True when the order was unknown locally and the snapshot created it. */
  created: boolean;
}

/** One event of a group commit's batch ({@link OrderWriter.applyBatch}). */
export interface ApplyItem {
  snapshot: Order;
  options: ApplyOptions;
}

const COLUMNS = ORDER_COLUMNS.join(', ');
const VALUES = ORDER_COLUMNS.map((c) => `@${c}`).join(', ');
const INSERT_ORDER = `INSERT INTO orders (${COLUMNS}) VALUES (${VALUES}) RETURNING id`;
const INSERT_ORDER_IF_NEW = `INSERT INTO orders (${COLUMNS}) VALUES (${VALUES}) ON CONFLICT DO NOTHING`;
const UPDATE_ORDER = `UPDATE orders SET ${ORDER_COLUMNS.map((c) => `${c} = @${c}`).join(', ')} WHERE id = @id`;
/** The same writes with the debit of an order accepted now (balance.ts), in one statement. */
const INSERT_ORDER_DEBITED = `INSERT INTO orders (${COLUMNS}, debited_amount) VALUES (${VALUES}, @debited_amount) RETURNING id`;
const UPDATE_ORDER_DEBITED = `UPDATE orders SET ${ORDER_COLUMNS.map((c) => `${c} = @${c}`).join(', ')},
  debited_amount = @debited_amount WHERE id = @id`;
const SET_DEBITED = 'UPDATE orders SET debited_amount = @debited_amount WHERE id = @id';
const EVENT_BY_KEY = `SELECT partner_ref FROM order_events
  WHERE source = @source AND upstream = @upstream AND event_id = @eventId`;
/** The name in the order's upstream's catalog of the product an order asked for, by code or else by id. */
const CATALOG_NAME = `SELECT name FROM catalog_products WHERE upstream = @upstream AND code = @code
  UNION ALL SELECT name FROM catalog_products WHERE upstream = @upstream AND lower(id) = lower(@id) LIMIT 1`;
const START_SUBMISSION = `UPDATE orders SET first_sent_at = COALESCE(first_sent_at, @now), create_in_doubt_at = @now,
  poll_leased_until = @until WHERE id = @id`;
/**
 * An order's next attempt starts with no claim (the ended attempt's sender lets go of a row that
 * is no longer its attempt) and no debit (the ledger accounted the ended one).
 */
const START_NEXT_ATTEMPT =
  'UPDATE orders SET poll_leased_until = NULL, lease_token = NULL, debited_amount = NULL WHERE id = @id';
const INSERT_EVENT = `INSERT INTO order_events
    (partner_ref, source, upstream, event_id, status, payload, received_at, occurred_at, applied_at, changed, reason)
  VALUES
    (@partner_ref, @source, @upstream, @event_id, @status, @payload, @received_at, @occurred_at, @applied_at, @changed, @reason)`;

/**
 * The only writer of order state: the orders themselves and their audit trail (`order_events`).
 * Every change to an order's status goes through {@link OrderWriter.applyOrderSnapshot},
 * whatever its source; the create call's other outcomes are recorded by {@link markRejected},
 * {@link markBlocked} and {@link markSubmissionUnknown}. What each write does (the state machine's
 * verdict, the merged row, its schedule, its feed event, its audit row) is planned by the pure
 * functions of domain/apply-plan.ts; this class finds the rows, asks for the
 * plan and carries it out in one transaction.
 */
export class OrderWriter {
  readonly #context: StoreContext;
  readonly #plans: PollPlans;
  readonly #feed: ChangeFeed;
  readonly #ledger: BalanceLedger;
  readonly #failover: FailoverSettings;

  constructor(
    context: StoreContext,
    plans: PollPlans,
    feed: ChangeFeed,
    ledger: BalanceLedger,
    failover: FailoverSettings = DEFAULT_FAILOVER_SETTINGS,
  ) {
    this.#context = context;
    this.#plans = plans;
    this.#feed = feed;
    this.#ledger = ledger;
    this.#failover = failover;
  }

  /**
   * Writes an order before it is submitted upstream (submission state `pending`). A partner_ref
   * that exists already returns the existing order with `created: false`: never a second row.
   * The schedule makes it due for a poll like any new order, so one whose placing process dies
   * before the create answer is still resolved by the reconciler.
   */
  createLocalOrder(input: CreateLocalOrderInput): Promise<{ order: LocalOrder; created: boolean }> {
    // No feed event (an order not yet submitted has none), so no feed lock: on PostgreSQL a
    // shop's order is not held up behind a worker's batch; the unique partner_ref decides a race.
    return this.#context.db.write((tx) => this.#insertLocal(tx, input));
  }

  /**
   * {@link createLocalOrder} of a queued order (the shop API's), admitted only while fewer than
   * `backlog` orders are queued: the count and the insert in one transaction that every
   * admission takes in turn (PostgreSQL's admission lock; SQLite's write lock), so two requests
   * never both take the last place. An order its partner_ref already names is answered as it is,
   * whether the backlog is full or not; `full` when it is and the order is new: nothing written.
   */
  admitQueuedOrder(
    input: Omit<CreateLocalOrderInput, 'queued'>,
    backlog: number,
  ): Promise<{ order: LocalOrder; created: boolean } | { full: true }> {
    return this.#context.db.write(async (tx) => {
      if (tx.dialect.admissionLockSql) await tx.get(tx.dialect.admissionLockSql);
      const known = await this.#context.find(tx, input.partnerRef, null);
      if (known) return { order: toLocalOrder(known), created: false };
      if ((await countQueued(tx)) >= backlog) return { full: true };
      return this.#insertLocal(tx, { ...input, queued: true });
    });
  }

  /** Inserts the order unless its partner_ref is taken: the new row, or the one that was there. */
  async #insertLocal(
    tx: SqlExecutor,
    input: CreateLocalOrderInput,
  ): Promise<{ order: LocalOrder; created: boolean }> {
    const now = this.#context.now();
    const row = planLocalOrder(input, now, await this.#plans.lookup(tx));
    // The read is issued with the insert (sql/together.ts) and runs after it: the new row, or
    // the one that was there.
    const [inserted, stored] = await together([
      tx.run(INSERT_ORDER_IF_NEW, row),
      this.#context.find(tx, row.partner_ref, null),
    ]);
    return { order: toLocalOrder(stored!), created: inserted.changes === 1 };
  }

  /**
   * Applies an upstream order snapshot (a create answer, a webhook, a poll): the only way an
   * order's status changes. In one immediate transaction it
   * 1. returns `duplicate: true` and records nothing when (source, eventId) was applied before;
   * 2. finds the order by partner_ref, else invoice_number, or creates it (placed elsewhere, or
   *    its webhook beat the create answer);
   * 3. decides with decisions.md's state machine (see `decideSnapshot`): an order with no status
   *    yet takes any known status (`initial`), a newer state may skip late or lost ones, and a
   *    status outside the table is kept in `upstream_status` only;
   * 4. marks the submission accepted, records the event, and sets the order's next poll as its
   *    product's first-poll plan says (domain/poll-rules.ts, `afterChange`; store/poll-plans.ts);
   * 5. accounts the balance: a debit when the upstream first accepts the order, a credit when it
   *    first becomes FAILED or REFUNDED ({@link BalanceLedger.accountOrderWrite} and {@link BalanceLedger.recordInLedger}).
   *
   * Rejects with `INVALID_SNAPSHOT` (permanent) for a snapshot without a status or any reference.
   */
  async applyOrderSnapshot(snapshot: Order, options: ApplyOptions): Promise<ApplyResult> {
    const fields = this.#read(snapshot);
    return this.#context.db.write((tx) => this.#apply(tx, snapshot, fields, options), { feed: true });
  }

  /**
   * The group commit's batch (shared/group-commit.ts): every item applied as by
   * {@link applyOrderSnapshot}, all in ONE transaction, each in its own savepoint, so an item
   * that fails (`INVALID_SNAPSHOT`, a constraint) rolls back only its own writes and fails only
   * its own outcome. The outcomes come after COMMIT has returned; when the transaction as a whole
   * fails (the write lock not taken in `lockTimeoutMs`, COMMIT, I/O), the call rejects and
   * nothing of the batch is written.
   */
  applyBatch(
    items: readonly ApplyItem[],
    { lockTimeoutMs }: Pick<WriteOptions, 'lockTimeoutMs'> = {},
  ): Promise<Outcome<ApplyResult>[]> {
    return this.#context.db.writeBatch(
      items.map(({ snapshot, options }) => async (tx: SqlExecutor) => {
        const fields = this.#read(snapshot);
        return this.#apply(tx, snapshot, fields, options);
      }),
      { feed: true, ...(lockTimeoutMs === undefined ? {} : { lockTimeoutMs }) },
    );
  }

  /**
   * Records that the upstream refused the create call (HTTP 400): the submission becomes
   * `rejected` with the upstream's code and detail, and polling ends. No effect on an order the
   * upstream has already confirmed. Never touches `status`. `claim`: the claim the create was
   * sent under; an outcome whose claim another process has taken since changes nothing (that
   * process's create settles the order), as for every `mark…` below.
   */
  markRejected(
    partnerRef: string,
    code: string,
    detail: string,
    { claim }: { claim?: string } = {},
  ): Promise<LocalOrder> {
    return this.#settleSubmission(partnerRef, { state: 'rejected', code, detail }, claim);
  }

  /**
   * Records that the upstream refused the create call for our configuration (401/403): the
   * submission becomes `blocked` with the upstream's code and detail, never `rejected`, and the
   * order is due at once, so the reconciler submits it again with its partner_ref as soon as a
   * probe shows the configuration works. `inDoubt` (default false: the refusal answered): an
   * earlier attempt may have reached the upstream (the order cannot be cancelled then). No effect
   * on an order the upstream has already confirmed or rejected. Never touches `status`.
   */
  markBlocked(
    partnerRef: string,
    code: string,
    detail: string,
    { inDoubt = false, claim }: { inDoubt?: boolean; claim?: string } = {},
  ): Promise<LocalOrder> {
    return this.#settleSubmission(partnerRef, { state: 'blocked', code, detail, inDoubt }, claim);
  }

  /**
   * Records that the create call's outcome is unknown (no definite answer after its retries, or
   * a 4xx after an attempt that may have reached the upstream: `refusal`): the submission
   * becomes `unknown` and the order is due for a poll now. `inDoubt` (default true): a create
   * may have reached the upstream; false when none can have (the budget refused the first
   * attempt). No effect on an order the upstream has already confirmed or rejected. Never
   * touches `status`.
   */
  markSubmissionUnknown(
    partnerRef: string,
    {
      inDoubt = true,
      refusal,
      claim,
    }: { inDoubt?: boolean; refusal?: { code: string; detail: string }; claim?: string } = {},
  ): Promise<LocalOrder> {
    return this.#settleSubmission(
      partnerRef,
      { state: 'unknown', inDoubt, ...(refusal === undefined ? {} : { refusal }) },
      claim,
    );
  }

  /**
   * Marks a create of the order as sent, before the request leaves (the durable half of
   * "never reject what may exist"): `first_sent_at` on the first, and `create_in_doubt_at` until
   * the call's outcome settles it; the claim's lease is renewed with it. Only the holder of the
   * order's live claim (`claim`, from `store.claims`) may send: undefined when it ran out
   * or another holds it now; the lease is renewed for `leaseMs` (`RECONCILE_LEASE_S`).
   * `knownAbsent`: a read by partner_ref has just answered 404, so no earlier create left an
   * order upstream.
   */
  startSubmission(
    partnerRef: string,
    claim: string,
    { leaseMs, knownAbsent = false }: { leaseMs: number; knownAbsent?: boolean },
  ): Promise<StartedSubmission | undefined> {
    return this.#context.db.write(async (tx) => {
      const now = this.#context.now();
      const row = await this.#context.mustFindForWrite(tx, partnerRef);
      if (row.lease_token !== claim || (row.poll_leased_until ?? 0) <= now) return undefined;
      const leasedUntil = now + leaseMs;
      await tx.run(START_SUBMISSION, { id: row.id, now, until: leasedUntil });
      return {
        order: toLocalOrder({ ...row, first_sent_at: row.first_sent_at ?? now, create_in_doubt_at: now }),
        inDoubtBefore: !knownAbsent && row.create_in_doubt_at !== null,
        leasedUntil,
      };
    });
  }

  /**
   * Cancels an order that was never sent (docs/api.md, "Cancelling"): queued, or blocked with no
   * create in doubt, and not claimed by a sender right now ({@link whyNotCancellable}). The
   * submission becomes `cancelled` with `cancellation`'s code and detail and the feed gets
   * `order.cancelled`. Cancelling and a sender's claim are written in transactions on the row
   * (`FOR UPDATE` on PostgreSQL), so never both. Throws `ORDER_NOT_FOUND` for an unknown ref.
   */
  cancelOrder(ref: string, cancellation: Cancellation): Promise<CancelResult> {
    return this.#context.db.write(
      async (tx) => {
        const now = this.#context.now();
        const row = await this.#context.mustFindForWrite(tx, ref);
        const why = whyNotCancellable(row, now);
        if (why !== null) return { cancelled: false, order: toLocalOrder(row), why };
        return {
          cancelled: true,
          order: await this.#writeSettlement(tx, planCancel(row, cancellation, now), now),
        };
      },
      { feed: true },
    );
  }

  /**
   * Cancels, with code `EXPIRED`, the orders still waiting to be sent (queued, or blocked with
   * nothing in doubt, not claimed now) that were written before `writtenBefore` (ms): up to
   * `limit` of them, oldest first, passing over a row another transaction holds (the next sweep
   * takes it). Returns their partner_refs. API_SUBMISSION_MAX_AGE_S: no
   * top-up reaches a customer hours after the shop gave up on it.
   */
  expireWaitingOrders(writtenBefore: number, limit = 100): Promise<string[]> {
    return this.#context.db.write(
      async (tx) => {
        const now = this.#context.now();
        const rows = await tx.all<StoredOrderRow>(
          `SELECT * FROM orders ${tx.dialect.indexedBy('orders_waiting')}
           WHERE submission_state IN ('queued', 'blocked') AND local_created_at < @writtenBefore
             AND create_in_doubt_at IS NULL AND (poll_leased_until IS NULL OR poll_leased_until <= @now)
           ORDER BY local_created_at LIMIT @limit ${tx.dialect.skipLocked}`,
          { writtenBefore, now, limit },
        );
        const detail = `not sent within ${Math.round((now - writtenBefore) / 1000)} s of being placed (API_SUBMISSION_MAX_AGE_S)`;
        for (const row of rows) {
          await this.#writeSettlement(tx, planCancel(row, { code: 'EXPIRED', detail }, now), now);
        }
        return rows.map((row) => row.partner_ref);
      },
      { feed: true },
    );
  }

  #read(snapshot: Order): OrderSnapshot {
    const read = readOrderSnapshot(snapshot);
    if (!read.ok) throw new StoreError('INVALID_SNAPSHOT', `${read.problem}: park the event`);
    return read.snapshot;
  }

  /**
   * The apply's statements in two round trips on PostgreSQL (docs/store-backends.md, "Round trips
   * per apply"): the event-id check with the order's look-up, then every write of the plan issued
   * together (sql/together.ts), in the plan's order: feed event, order row (with its debit),
   * ledger, audit row. A statement more only when the plan needs one: the first-poll plans past
   * their cache, a name from the catalog, a low balance.
   */
  async #apply(
    tx: SqlExecutor,
    snapshot: Order,
    fields: OrderSnapshot,
    options: ApplyOptions,
  ): Promise<ApplyResult> {
    const now = this.#context.now();
    const eventId = options.eventId ?? null;
    const upstream = options.upstream ?? DEFAULT_UPSTREAM;
    // The look-up is issued with the check, before its answer (it only reads, and locks a row
    // the transaction would lock next anyway; a duplicate's lock is held to the commit too).
    const [seen, found] = await together([
      eventId === null
        ? Promise.resolve(undefined)
        : tx.get<{ partner_ref: string }>(EVENT_BY_KEY, { source: options.source, upstream, eventId }),
      // An invoice number names an order of the upstream that sent the snapshot only.
      this.#context.findForWrite(tx, fields.partner_ref, fields.invoice_number, upstream),
    ]);
    if (seen) {
      const row =
        found?.partner_ref === seen.partner_ref
          ? found
          : await this.#context.find(tx, seen.partner_ref, null);
      return {
        order: toLocalOrder(row!),
        changed: false,
        reason: 'duplicate_event',
        duplicate: true,
        created: false,
      };
    }

    const current =
      found ?? (await this.#context.findEndedAttempt(tx, fields.partner_ref, tx.dialect.forUpdate)) ?? null;
    // An order not yet seen accepted is adopted only by a snapshot of ours: its product name is
    // compared with the catalog's (apply-plan.ts, mustAdopt), read only then.
    const catalogName =
      current !== null &&
      current.submission_state !== 'accepted' &&
      current.target_data !== null &&
      fields.product_name !== null
        ? ((
            await tx.get<{ name: string }>(CATALOG_NAME, {
              upstream: current.upstream,
              code: current.product_code,
              id: current.product_id,
            })
          )?.name ?? null)
        : null;
    const plan = planApply({
      current,
      snapshot,
      fields,
      options,
      now,
      firstPolls: await this.#plans.lookup(tx),
      catalogName,
    });
    // The ledger accounts the attempt the snapshot settled (its debit, its credit on FAILED),
    // whether or not the order goes on to its next attempt in this same write.
    const accounting = await this.#ledger.accountOrderWrite(tx, current, plan.row);
    const debited = accounting?.debitedAmount
      ? accounting.debitedAmount.amount
      : (current?.debited_amount ?? null);
    const nextAttempt =
      current === null ? null : await this.#nextAttempt(tx, current, plan.row, now, debited);
    const row = nextAttempt ?? plan.row;
    const feed = nextAttempt ? publish(current, nextAttempt, now) : plan.feed;
    const debit = accounting?.debitedAmount ?? null;
    const [, id] = await together([
      this.#append(tx, feed, now),
      this.#writeRow(tx, plan.write, row, debit),
      nextAttempt ? tx.run(START_NEXT_ATTEMPT, { id: row.id }) : Promise.resolve(),
      accounting ? this.#ledger.recordInLedger(tx, accounting) : Promise.resolve(),
      tx.run(INSERT_EVENT, plan.event),
    ]);
    if (id !== undefined) row.id = id;
    const { changed, reason, created } = plan;
    return { order: toLocalOrder(row), changed, reason, duplicate: false, created };
  }

  /**
   * The order's next attempt if the write `current` → `next` ended the current one as a
   * definite non-fulfilment (domain/attempts.ts, `planNextAttempt`), unless its partner_ref
   * (`<shop ref>~<n>`) already names another order (placed elsewhere, or before several
   * upstreams were configured): then the order ends with this attempt's outcome, since the
   * next could not be told apart from that order upstream. `debited`: what the accounting
   * debited for the ending attempt, kept on its record.
   */
  async #nextAttempt(
    tx: SqlExecutor,
    current: OrderRow,
    next: OrderRow,
    now: number,
    debited: number | null,
  ): Promise<OrderRow | null> {
    const attempt = planNextAttempt(current, next, now, this.#failover, debited);
    if (attempt === null) return null;
    const taken = await this.#context.find(tx, attempt.partner_ref, null);
    return taken === undefined ? attempt : null;
  }

  /**
   * Issues the order row's write as the plan says, with the debit the ledger recorded on it
   * (`debit`: into `debited_amount`; null: that column is left as it is); a new row's id.
   */
  #writeRow(
    tx: SqlExecutor,
    write: 'insert' | 'update' | 'none',
    row: OrderRow,
    debit: { amount: number | null } | null,
  ): Promise<number | undefined> {
    const params = debit ? { ...row, debited_amount: debit.amount } : row;
    if (write === 'insert') {
      return tx.get<{ id: number }>(debit ? INSERT_ORDER_DEBITED : INSERT_ORDER, params).then((r) => r!.id);
    }
    if (write === 'update')
      return tx.run(debit ? UPDATE_ORDER_DEBITED : UPDATE_ORDER, params).then(() => undefined);
    if (debit) return tx.run(SET_DEBITED, params).then(() => undefined);
    return Promise.resolve(undefined);
  }

  #settleSubmission(ref: string, outcome: SubmissionOutcome, claim: string | undefined): Promise<LocalOrder> {
    return this.#context.db.write(
      async (tx) => {
        const now = this.#context.now();
        const row = await this.#context.mustFindForWrite(tx, ref);
        // The outcome of an attempt that ended since (the order went on to its next upstream)
        // is recorded under that attempt and settles nothing.
        if (isEndedAttempt(row, ref)) {
          return this.#writeSettlement(tx, planSettlement(row, outcome, now, { endedAttempt: ref }), now);
        }
        const held = claim === undefined || row.lease_token === claim;
        const plan = planSettlement(row, outcome, now, { held });
        const next = plan.update ? await this.#nextAttempt(tx, row, plan.row, now, row.debited_amount) : null;
        if (next === null) return this.#writeSettlement(tx, plan, now);
        // A refusal that proves the order was not placed: the next candidate's attempt instead.
        return this.#writeSettlement(tx, { ...plan, row: next, feed: publish(row, next, now) }, now, {
          nextAttempt: true,
        });
      },
      { feed: true },
    );
  }

  /**
   * Writes a settlement or cancel plan: feed event, row, audit row, issued together
   * (sql/together.ts). `nextAttempt`: the row is the order's next attempt, whose claim is free.
   */
  async #writeSettlement(
    tx: SqlExecutor,
    plan: SettlementPlan,
    now: number,
    { nextAttempt = false } = {},
  ): Promise<LocalOrder> {
    await together([
      plan.update ? this.#append(tx, plan.feed, now) : Promise.resolve(),
      plan.update ? tx.run(UPDATE_ORDER, plan.row) : Promise.resolve(),
      nextAttempt ? tx.run(START_NEXT_ATTEMPT, { id: plan.row.id }) : Promise.resolve(),
      tx.run(INSERT_EVENT, plan.event),
    ]);
    return toLocalOrder(plan.row);
  }

  async #append(tx: SqlExecutor, change: FeedChange | null, now: number): Promise<void> {
    if (change) await this.#feed.append(tx, change.type, change.order, change.previousStatus, now);
  }
}
