import { uniformFloat64 } from 'pure-rand/distribution/uniformFloat64';
import { xoroshiro128plus } from 'pure-rand/generator/xoroshiro128plus';
import type { RandomGenerator } from 'pure-rand/types/RandomGenerator';
import { z } from 'zod';

/** The faults the simulator can inject; every one is off in {@link NO_FAULTS}. See docs/simulator.md. */
export interface Faults {
  /** Probability that a webhook attempt is not sent; the event is lost (never retried). */
  webhook_drop: number;
  /**
   * Probability that an attempt of an event carrying a final state (SUCCESS with a serial,
   * FAILED, REFUNDED) is not sent; the event is lost like with `webhook_drop`. Other events are
   * never dropped by it.
   */
  webhook_drop_final: number;
  /** Probability that a webhook attempt is sent twice, byte for byte. */
  webhook_duplicate: number;
  /** Probability that a webhook attempt is signed with a wrong secret. */
  webhook_bad_signature: number;
  /** Probability that a webhook attempt carries a timestamp 600 s in the past (correctly signed). */
  webhook_stale_timestamp: number;
  /** Probability that an event is held back and sent after the next event of the same order. */
  webhook_reorder: number;
  /** Extra real milliseconds before every webhook attempt (not scaled by timeScale). */
  webhook_delay_ms: number;
  /** Real milliseconds between committing an order and answering POST /orders. */
  create_response_delay_ms: number;
  /** Probability that POST /orders commits, then destroys the connection without an answer. */
  create_drop_response: number;
  /** Probability that a member API request is answered 503 before anything else happens. */
  error_5xx: number;
  /** When true, orders get `nickname: null` (and still proceed, spec §4 rule 4). */
  nickname_validator_down: boolean;
  /**
   * Orders (partner_ref or invoice number) whose `GET /orders/:ref` answers 500 INTERNAL_ERROR
   * on every request, after auth and the rate limit: an upstream that fails on some orders only.
   */
  order_read_errors: readonly string[];
  /**
   * The body of a 404 of `GET /orders/:ref` instead of the ORDER_NOT_FOUND error (JSON when it
   * parses, else text/plain): the real upstream's 404 body is not shown (decisions.md). Null: the
   * spec's shape.
   */
  order_not_found_body: string | null;
}

/** A fault drawn as a probability. */
export type ProbabilityFault = {
  [K in keyof Faults]: Faults[K] extends number ? (K extends `${string}_ms` ? never : K) : never;
}[keyof Faults];

export const NO_FAULTS: Readonly<Faults> = Object.freeze({
  webhook_drop: 0,
  webhook_drop_final: 0,
  webhook_duplicate: 0,
  webhook_bad_signature: 0,
  webhook_stale_timestamp: 0,
  webhook_reorder: 0,
  webhook_delay_ms: 0,
  create_response_delay_ms: 0,
  create_drop_response: 0,
  error_5xx: 0,
  nickname_validator_down: false,
  order_read_errors: Object.freeze([]),
  order_not_found_body: null,
});

/** A longer list of failing orders or 404 body is surely a mistake. */
const MAX_FAULT_REFS = 10_000;
const MAX_NOT_FOUND_BODY = 10_000;
/** One hour: a longer injected delay is surely a typo. */
const MAX_FAULT_DELAY_MS = 3_600_000;
const probability = z.number().min(0, 'must be between 0 and 1').max(1, 'must be between 0 and 1');
const delayMs = z
  .number()
  .int('must be an integer number of milliseconds')
  .min(0, 'must be >= 0')
  .max(MAX_FAULT_DELAY_MS, `must be <= ${MAX_FAULT_DELAY_MS}`);

/** Body of `POST /__sim/faults`: any subset of {@link Faults}; an unknown key is an error. */
export const faultsPatchSchema = z
  .strictObject({
    webhook_drop: probability,
    webhook_drop_final: probability,
    webhook_duplicate: probability,
    webhook_bad_signature: probability,
    webhook_stale_timestamp: probability,
    webhook_reorder: probability,
    webhook_delay_ms: delayMs,
    create_response_delay_ms: delayMs,
    create_drop_response: probability,
    error_5xx: probability,
    nickname_validator_down: z.boolean(),
    order_read_errors: z
      .array(z.string().min(1, 'must be non-empty references'))
      .max(MAX_FAULT_REFS, `must list at most ${MAX_FAULT_REFS} references`),
    order_not_found_body: z
      .string()
      .max(MAX_NOT_FOUND_BODY, `must be at most ${MAX_NOT_FOUND_BODY} characters`)
      .nullable(),
  })
  .partial();

/**
 * The current faults and the one seeded random source every fault draw comes from, so that a
 * run with the same seed and the same sequence of requests injects the same faults.
 */
export class FaultInjector {
  private readonly initial: Readonly<Faults>;
  private faults: Faults;
  private random: RandomGenerator;

  /** `initial`: the faults on at the start and after every reset (the `faults` option); default none. */
  constructor(
    private readonly seed: number,
    initial: Partial<Faults> = {},
  ) {
    this.initial = { ...NO_FAULTS, ...initial };
    this.faults = { ...this.initial };
    this.random = xoroshiro128plus(seed);
  }

  get current(): Readonly<Faults> {
    return this.faults;
  }

  /** Merges a validated patch into the current faults and returns the result. */
  merge(patch: Partial<Faults>): Readonly<Faults> {
    this.faults = { ...this.faults, ...patch };
    return this.faults;
  }

  /** The initial faults again (all off by default) and the random source back at its seed. */
  reset(): void {
    this.faults = { ...this.initial };
    this.random = xoroshiro128plus(this.seed);
  }

  /** True with the fault's probability. A fault at 0 draws nothing, so it does not shift the others. */
  roll(fault: ProbabilityFault): boolean {
    const chance = this.faults[fault];
    return chance > 0 && uniformFloat64(this.random) < chance;
  }
}
