import { uniformFloat64 } from 'pure-rand/distribution/uniformFloat64';
import { xoroshiro128plus } from 'pure-rand/generator/xoroshiro128plus';
import type { RandomGenerator } from 'pure-rand/types/RandomGenerator';
import type { OrderStatus } from '../upstream/model.js';

/** Base wait before each automatic status step (multiplied by timeScale). */
export const STATUS_STEP_MS = 2_000;

/** One automatic status change; `withSerial` puts a serial number on a SUCCESS. */
export interface ProgressionStep {
  readonly status: OrderStatus;
  readonly withSerial: boolean;
}

const step = (status: OrderStatus, withSerial = false): ProgressionStep => ({ status, withSerial });

/**
 * The timeline of an order after PENDING, chosen by the last four characters of `data.user_id`
 * (the magic suffixes of docs/simulator.md). `0000` never gets here: it is refused at creation.
 */
export const PROGRESSIONS: Readonly<Record<string, readonly ProgressionStep[]>> = {
  '0002': [step('FAILED')],
  '0003': [step('PROCESSING'), step('SUCCESS', true)],
  '0004': [step('PROCESSING'), step('FAILED')],
  '0005': [step('SUCCESS'), step('SUCCESS', true)],
  '0006': [step('SUCCESS', true), step('REFUNDED')],
  /** Stays PENDING until the control API moves it. */
  '0007': [],
};

/** Every other user id (and an order without one): PENDING → SUCCESS with a serial number. */
export const DEFAULT_PROGRESSION: readonly ProgressionStep[] = [step('SUCCESS', true)];

export function progressionFor(userId: string | undefined): readonly ProgressionStep[] {
  const suffix = userId?.slice(-4);
  return suffix !== undefined && Object.hasOwn(PROGRESSIONS, suffix)
    ? PROGRESSIONS[suffix]!
    : DEFAULT_PROGRESSION;
}

/** Seed offset of the fail-ratio draws, so that they share a stream with neither the faults nor the profile. */
const FAIL_SEED_SALT = 0x165667b1;

/**
 * Picks each new order's progression: by its user id's magic suffix, and for an ordinary order
 * (no suffix) FAILED instead of SUCCESS with the probability `failRatio` (the fixture's
 * `fail_ratio`), as if its user id ended in `0002`. The draws come from a seeded stream of their
 * own, one per ordinary order and none at ratio 0, so the same seed and the same sequence of
 * creates fail the same orders, whatever webhooks and faults do meanwhile.
 */
export class ProgressionPicker {
  private random: RandomGenerator;

  constructor(
    private readonly failRatio: number,
    private readonly seed: number,
  ) {
    this.random = xoroshiro128plus((seed ^ FAIL_SEED_SALT) | 0);
  }

  pick(userId: string | undefined): readonly ProgressionStep[] {
    const progression = progressionFor(userId);
    if (progression !== DEFAULT_PROGRESSION || this.failRatio === 0) return progression;
    return uniformFloat64(this.random) < this.failRatio ? PROGRESSIONS['0002']! : progression;
  }

  /** Back to the seed (the control API's reset). */
  reset(): void {
    this.random = xoroshiro128plus((this.seed ^ FAIL_SEED_SALT) | 0);
  }
}
