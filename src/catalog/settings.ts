import { z } from 'zod';
import { int } from '../config/variables.js';
import type { ProductLink } from './product-map.js';

/** The local catalog's and balance's variables (README, "Settings"). */
export const catalogVariables = z.object({
  CATALOG_REFRESH_S: int(0)
    .default(900)
    .describe(
      'Seconds between two refreshes of the local catalog and the profile balance by `h2h-sync worker` (a BullMQ job scheduler; three upstream calls from the poll share of the rate budget); `0` = only `h2h-sync catalog sync`.',
    ),
  H2H_PRODUCT_MAP_FILE: z
    .string()
    .min(1)
    .optional()
    .describe(
      'A JSON file linking products whose codes differ between upstreams (docs/upstreams.md, "Products"): `{"products": [{"code": "ML-86", "upstreams": {"beta": "MLBB-86"}}]}`, the shop\'s code and each named upstream\'s own. Validated at start-up. Default: none; products with the same code on several upstreams are candidates for one another.',
    ),
  BALANCE_LOW_THRESHOLD: z.coerce
    .number()
    .min(0)
    .default(0)
    .describe(
      'The accounted balance of an upstream under which a `balance.low` event naming it is sent, once each time it falls under (docs/api.md, "Balance"); the same for every upstream; `0` = never. Every process that writes orders must use the same value.',
    ),
  BALANCE_DRIFT_THRESHOLD: z.coerce
    .number()
    .min(0)
    .default(0)
    .describe(
      "How far (in the balance's currency, either way) an upstream's profile balance may differ from the balance h2h-sync expected, beyond what its creates in doubt explain, before it is a drift (docs/api.md, \"Balance drift\"): a `balance.drift` event at the second catalog refresh in a row past it, once per episode, and, when money came back, the audit reads that upstream's most recent SUCCESS orders first. Set it above a few order prices. `0` = no episode, event or steering (the drift is still recorded and shown).",
    ),
});

/** The local catalog's and balance's section (docs/api.md, "Catalog and balance"), in ms. */
export function catalogSettings(config: {
  settings: z.output<typeof catalogVariables>;
  productLinks?: readonly ProductLink[];
}) {
  const s = config.settings;
  return {
    /** 0: no scheduled refresh. */
    refreshEveryMs: s.CATALOG_REFRESH_S * 1000,
    balanceLowThreshold: s.BALANCE_LOW_THRESHOLD,
    balanceDriftThreshold: s.BALANCE_DRIFT_THRESHOLD,
    /** The product map's links (H2H_PRODUCT_MAP_FILE), validated by `loadConfig`; none without it. */
    productLinks: config.productLinks ?? [],
  };
}
export type CatalogSettings = ReturnType<typeof catalogSettings>;
