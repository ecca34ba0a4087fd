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
