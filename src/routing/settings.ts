import { z } from 'zod';
import { int } from '../config/variables.js';
import { DEFAULT_FAILOVER_SETTINGS, type FailoverSettings, MAX_ATTEMPTS_LIMIT } from '../domain/attempts.js';

/** How an order's upstream is chosen among its candidates (docs/upstreams.md, "Routing"). */
export const ROUTING_POLICIES = ['cheapest', 'priority', 'fastest'] as const;
export type RoutingPolicy = (typeof ROUTING_POLICIES)[number];

/** The routing's and failover's variables (README, "Settings"). */
export const routingVariables = z.object({
  H2H_ROUTING_POLICY: z
    .enum(ROUTING_POLICIES)
    .default('cheapest')
    .describe(
      'How a shop order picks its upstream among the candidates that have its product (docs/upstreams.md, "Routing"): `cheapest` (catalog price), `priority` (the upstreams file\'s order or `priority`), `fastest` (the learned completion time). Only with several upstreams.',
    ),
  H2H_ROUTING_MAX_WAIT_S: int(1)
    .default(30)
    .describe(
      'A candidate upstream whose submission queue would keep a new order waiting longer than this for its rate budget is passed over (docs/upstreams.md, "Routing"): what spreads a rush over every upstream\'s 60 calls a minute.',
    ),
  H2H_MAX_ATTEMPTS: int(1)
    .max(MAX_ATTEMPTS_LIMIT)
    .default(DEFAULT_FAILOVER_SETTINGS.maxAttempts)
    .describe(
      'Most upstreams one shop order is placed on, one after another, each only after the one before surely did not fulfil it (docs/upstreams.md, "Orders and attempts"); `1` = never fail over. Every process that writes orders must use the same value.',
    ),
  H2H_FAILOVER_WITHIN_S: int(0)
    .default(DEFAULT_FAILOVER_SETTINGS.withinMs / 1000)
    .describe(
      "No new attempt for an order placed longer ago than this: it ends with its last attempt's outcome. Every process that writes orders must use the same value.",
    ),
});

/** The routing's section: the policy and when an order goes on to its next upstream, in ms. */
export function routingSettings(config: { settings: z.output<typeof routingVariables> }): {
  policy: RoutingPolicy;
  maxQueueWaitMs: number;
  failover: FailoverSettings;
} {
  const s = config.settings;
  return {
    policy: s.H2H_ROUTING_POLICY,
    maxQueueWaitMs: s.H2H_ROUTING_MAX_WAIT_S * 1000,
    failover: { maxAttempts: s.H2H_MAX_ATTEMPTS, withinMs: s.H2H_FAILOVER_WITHIN_S * 1000 },
  };
}
export type RoutingSettings = ReturnType<typeof routingSettings>;

/**
 * What every process that writes orders gives the store (`openStore`'s `failover`): the limits
 * of {@link routingSettings} and the upstreams configured now, so that a next attempt never goes
 * to an upstream removed from the file since the order was routed.
 */
export function failoverSettings(config: {
  settings: z.output<typeof routingVariables>;
  upstreams: readonly { name: string }[];
}): FailoverSettings {
  return { ...routingSettings(config).failover, upstreams: config.upstreams.map((a) => a.name) };
}
