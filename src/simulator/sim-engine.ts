import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import { decideTransition, type TransitionVerdict } from '../domain/state-machine.js';
import { Catalog, priceFor } from './catalog.js';
import { FaultInjector, type Faults } from './faults.js';
import type { LoadedFixture } from './fixture.js';
import { MemberDirectory, type MemberState } from './members.js';
import { OrderBook } from './order-book.js';
import { InvoiceNumbers, nicknameFor, serialNumberFor, targetLabel } from './order-identifiers.js';
import { parseOrderInput } from './order-input.js';
import { checkTarget, resolveOrderableProduct } from './order-rules.js';
import type { Timeline, TimingProfile } from './profile.js';
import { RollingWindowLimiter } from './rate-limiter.js';
import { upstreamError } from './sim-errors.js';
import type { RefundPlan, SimOrder } from './sim-order.js';
import { ProgressionPicker } from './status-progression.js';
import { TimerSet } from './timer-set.js';
import { WebhookDispatcher } from './webhook-dispatcher.js';

export interface SimEngineOptions {
  fixture: LoadedFixture;
  timeScale: number;
  seed: number;
  /** Requests per rolling minute per member; 0 = unlimited. */
  rateLimit: number;
  /** Length of the rolling rate window in ms. */
  rateWindowMs: number;
  webhookTimeoutMs: number;
  /** The faults on at the start and after every reset. */
  faults: Partial<Faults>;
  /** Draws timelines and webhook delays (docs/simulator.md, "Profiles"). */
  profile: TimingProfile;
  logger: Logger;
}

/** A simulated day in ms (before timeScale). */
export const DAY_MS = 86_400_000;

/** A status change asked for by the timeline or the control API. */
export interface StatusChange {
  status: string;
  serial_number?: string | null;
  /** Default on FAILED/REFUNDED: {@link DEFAULT_STATUS_MESSAGES}; otherwise null. */
  message?: string | null;
}

export const DEFAULT_STATUS_MESSAGES: Readonly<Record<string, string>> = {
  FAILED: 'Top-up failed at the provider; the amount was credited back',
  REFUNDED: 'Top-up reversed by the provider; the amount was credited back',
};

/** Statuses that give the member its money back (decisions.md, "Order states"). */
const CREDITED_BACK = new Set(['FAILED', 'REFUNDED']);

/**
 * The simulator's state and the only code that changes it: order creation, status changes,
 * reset. HTTP routes translate requests into these calls and nothing else.
 */
export class SimEngine {
  readonly catalog: Catalog;
  readonly faults: FaultInjector;
  readonly limiter: RollingWindowLimiter;
  readonly orders = new OrderBook();
  readonly webhooks: WebhookDispatcher;
  private membersOfRun: MemberDirectory;
  private readonly timers = new TimerSet();
  private readonly invoices = new InvoiceNumbers();
  private readonly progressions: ProgressionPicker;
  /** Aborts answers held back by `create_response_delay_ms` when the simulator closes. */
  private readonly closing = new AbortController();
  private closed = false;

  constructor(private readonly options: SimEngineOptions) {
    const { fixture } = options;
    this.catalog = new Catalog(fixture.categories, fixture.products);
    this.membersOfRun = new MemberDirectory(fixture.members);
    this.faults = new FaultInjector(options.seed, options.faults);
    this.progressions = new ProgressionPicker(fixture.failRatio, options.seed);
    this.limiter = new RollingWindowLimiter(options.rateLimit, options.rateWindowMs);
    this.webhooks = new WebhookDispatcher({
      timers: this.timers,
      faults: this.faults,
      timeScale: options.timeScale,
      profile: options.profile,
      timeoutMs: options.webhookTimeoutMs,
      logger: options.logger,
    });
  }

  get members(): MemberDirectory {
    return this.membersOfRun;
  }

  /**
   * POST /orders (spec §4 and decisions.md). Entirely synchronous: no other request can run
   * between the partner_ref lookup and the insert, so concurrent retries of one partner_ref
   * create one order and one debit. Throws the spec's 400s.
   */
  createOrder(member: MemberState, body: unknown): { created: boolean; order: SimOrder } {
    const input = parseOrderInput(body);
    if (input.partner_ref !== undefined) {
      const existing = this.orders.findByPartnerRef(member.member_id, input.partner_ref);
      if (existing) {
        existing.create_requests += 1;
        return { created: false, order: existing };
      }
    }
    const product = resolveOrderableProduct(this.catalog, input);
    checkTarget(product, input.data);
    const price = priceFor(product, member.member_role);
    if (member.balance < price) {
      throw upstreamError(
        'INSUFFICIENT_BALANCE',
        `the balance ${member.balance} is below the price ${price}`,
      );
    }

    const now = new Date();
    const invoiceNumber = this.invoices.next(now);
    const target = targetLabel(
      input.data,
      product.targetRules.map((rule) => rule.key),
    );
    const order: SimOrder = {
      member,
      product,
      invoice_number: invoiceNumber,
      partner_ref: input.partner_ref ?? invoiceNumber,
      amount: price,
      target,
      nickname: this.faults.current.nickname_validator_down
        ? null
        : nicknameFor(input.data.user_id ?? target),
      data: { ...input.data },
      callback_url: input.callback_url,
      created_at: now.toISOString(),
      status: 'PENDING',
      serial_number: null,
      message: null,
      success_at: null,
      create_requests: 1,
    };
    const timeline = this.options.profile.timeline(product.code, this.progressions.pick(input.data.user_id));
    order.timeline = timeline;
    member.balance -= price;
    this.orders.insert(order);
    this.scheduleSteps(order, timeline, 0);
    this.options.logger.debug(
      { invoice_number: invoiceNumber, member_id: member.member_id },
      'order created',
    );
    return { created: true, order };
  }

  /**
   * The one place an order's status changes, for the timeline and the control API alike. Applies
   * what `decideTransition` allows, credits FAILED/REFUNDED back and sends one webhook event.
   */
  changeStatus(
    order: SimOrder,
    change: StatusChange,
    options: { loseWebhooks?: boolean } = {},
  ): TransitionVerdict {
    const serialNumber = change.serial_number ?? null;
    const verdict = decideTransition(order, { status: change.status, serial_number: serialNumber });
    if (!verdict.apply) return verdict;
    if (verdict.reason === 'transition') {
      order.status = change.status;
      if (change.status === 'SUCCESS') {
        order.success_at ??= new Date().toISOString();
        if (order.refund_plan) this.scheduleRefund(order);
      }
      if (CREDITED_BACK.has(change.status)) order.member.balance += order.amount;
      order.message = change.message ?? DEFAULT_STATUS_MESSAGES[change.status] ?? null;
    } else if (change.message !== undefined) {
      order.message = change.message;
    }
    if (serialNumber !== null) order.serial_number = serialNumber;
    this.options.logger.info(
      { invoice_number: order.invoice_number, status: order.status, serial_number: order.serial_number },
      'order status changed',
    );
    this.webhooks.enqueue(order, { lost: options.loseWebhooks === true });
    return verdict;
  }

  /**
   * Plans a refund `plan.afterMs` simulated ms after the order's SUCCESS (× timeScale): now for
   * an order already SUCCESS, else when it gets there. With `loseWebhooks` every webhook of the
   * refund is recorded as dropped and never sent, so only a read of the order can learn it.
   */
  planRefund(order: SimOrder, plan: RefundPlan): void {
    this.timers.cancel(order.refund_timer);
    order.refund_plan = plan;
    if (order.status === 'SUCCESS') this.scheduleRefund(order);
  }

  private scheduleRefund(order: SimOrder): void {
    const plan = order.refund_plan;
    if (!plan || order.success_at === null) return;
    const dueAt = Date.parse(order.success_at) + plan.afterMs * this.options.timeScale;
    order.refund_timer = this.timers.schedule(Math.max(0, dueAt - Date.now()), () => {
      order.refund_timer = undefined;
      this.changeStatus(order, { status: 'REFUNDED' }, { loseWebhooks: plan.loseWebhooks });
    });
  }

  /** Holds an answer for `create_response_delay_ms` (real time); false when the simulator closes meanwhile. */
  async delayResponse(delayMs: number): Promise<boolean> {
    try {
      await sleep(delayMs, undefined, { signal: this.closing.signal });
      return true;
    } catch {
      return false;
    }
  }

  /** Back to the fixture: members, balances, products, orders, webhook log, rate windows, the initial faults and the seed. */
  reset(): void {
    this.timers.clearAll();
    this.webhooks.reset();
    this.orders.clear();
    this.limiter.clear();
    this.faults.reset();
    this.options.profile.reset();
    this.progressions.reset();
    this.membersOfRun = new MemberDirectory(this.options.fixture.members);
    this.catalog.reset();
    this.options.logger.info('simulator reset to the fixture');
  }

  /** Stops held answers first, so the HTTP server can drain. */
  abortHeldResponses(): void {
    this.closing.abort();
  }

  /** Cancels every timer and webhook delivery; nothing is scheduled afterwards. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.closing.abort();
    this.timers.close();
    await this.webhooks.close();
  }

  /** The timeline goes on past a step the state machine refuses (the control API may have moved the order). */
  private scheduleSteps(order: SimOrder, timeline: Timeline, index: number): void {
    const step = timeline.steps[index];
    if (!step) return;
    const previousAt = index === 0 ? 0 : timeline.steps[index - 1]!.at_ms;
    this.timers.schedule((step.at_ms - previousAt) * this.options.timeScale, () => {
      this.changeStatus(order, {
        status: step.status,
        serial_number: step.withSerial ? serialNumberFor(order.invoice_number) : null,
      });
      this.scheduleSteps(order, timeline, index + 1);
    });
  }
}
