import { z } from 'zod';
import { int } from '../config/variables.js';

/** The local catalog's and balance's variables (README, "Settings"). */
export const catalogVariables = z.object({
  CATALOG_REFRESH_S: int(0)
    .default(900)
    .describe(
      'Seconds between two refreshes of the local catalog and the profile balance by `h2h-sync worker` (a BullMQ job scheduler; three upstream calls from the poll share of the rate budget); `0` = only `h2h-sync catalog sync`.',
    ),
  BALANCE_LOW_THRESHOLD: z.coerce
    .number()
    .min(0)
    .default(0)
    .describe(
      'The accounted balance under which a `balance.low` event is sent, once each time it falls under (docs/api.md, "Balance"); `0` = never. Every process that writes orders must use the same value.',
    ),
});

/** The local catalog's and balance's section (docs/api.md, "Catalog and balance"), in ms. */
export function catalogSettings(config: { settings: z.output<typeof catalogVariables> }) {
  const s = config.settings;
  return {
    /** 0: no scheduled refresh. */
    refreshEveryMs: s.CATALOG_REFRESH_S * 1000,
    balanceLowThreshold: s.BALANCE_LOW_THRESHOLD,
  };
}
export type CatalogSettings = ReturnType<typeof catalogSettings>;
