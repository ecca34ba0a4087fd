import type { OrderStore } from '../store/order-store.js';
import { UpstreamCircuit } from '../store/upstream-circuit.js';
import type { UpstreamAccount } from '../upstream/upstreams.js';
import { type CandidateFacts, type OrderRouter, routeOrder } from './route-order.js';

export type { OrderRouter, RoutedOrder } from './route-order.js';

import type { RoutingPolicy } from './settings.js';

/** How many of an upstream's last SUCCESS orders of a product the `fastest` policy looks at. */
const COMPLETION_SAMPLES = 20;

/**
 * The router of a deployment with several upstreams (`config.upstreams`), reading what it
 * decides on from the store: each upstream's catalog (the candidates, their prices and whether
 * active), its circuit, its accounted balance and its recent completion times. Undefined with a
 * single upstream: every order is the default upstream's, as it always was.
 *
 * When no candidate is available (every circuit open, every balance short), the order is still
 * routed over all of them in the policy's order, and waits on the first as an order of a single
 * upstream would (its pump waits for the circuit; a refusal for the balance goes on to the
 * next): the shop's order is never refused for a state that may pass.
 */
export function createRouter(
  store: OrderStore,
  accounts: readonly Pick<UpstreamAccount, 'name' | 'priority' | 'rateLimit'>[],
  settings: { policy: RoutingPolicy; maxQueueWaitMs: number; rateWindowMs: number },
): OrderRouter | undefined {
  if (accounts.length < 2) return undefined;
  const { policy } = settings;
  const priorities = new Map(accounts.map((a) => [a.name, a.priority]));
  // A queue's wait: its orders at the account's whole rate (creates may take most of it).
  const msPerCreate = new Map(accounts.map((a) => [a.name, settings.rateWindowMs / a.rateLimit]));
  const circuits = new Map(accounts.map((a) => [a.name, new UpstreamCircuit(store.context, a.name)]));

  const factsOf = async (code: string): Promise<CandidateFacts[]> => {
    const candidates = (await store.catalog.candidates({ code })).filter((c) => priorities.has(c.upstream));
    return Promise.all(
      candidates.map(async (c): Promise<CandidateFacts> => {
        const [circuit, balance, queued, times] = await Promise.all([
          circuits.get(c.upstream)!.state(),
          store.balance.viewOf(c.upstream),
          store.queries.countQueuedOn(c.upstream),
          policy === 'fastest'
            ? store.queries.completionTimes(c.upstream, c.productCode, COMPLETION_SAMPLES)
            : Promise.resolve([]),
        ]);
        return {
          upstream: c.upstream,
          product_code: c.productCode,
          product_name: c.name,
          price: c.price,
          isActive: c.isActive,
          priority: priorities.get(c.upstream)!,
          circuitOpen: circuit?.code ?? null,
          balance: balance.balance,
          completionMs: median(times),
          queueWaitMs: queued * msPerCreate.get(c.upstream)!,
        };
      }),
    );
  };

  return {
    upstreams: accounts.map((a) => a.name),
    async route(code) {
      const facts = await factsOf(code);
      if (facts.length === 0) return undefined;
      const decision = routeOrder(facts, policy, settings);
      if (decision.ok) return { first: decision.first, route: decision.route };
      // Nothing available now: in the policy's order over all of them, waiting on the first.
      const all = routeOrder(
        facts.map((f) => ({ ...f, isActive: true, circuitOpen: null, balance: null, queueWaitMs: 0 })),
        policy,
      );
      if (!all.ok) return undefined;
      const why = decision.skipped.map((s) => `${s.upstream}: ${s.why}`).join('; ');
      return {
        first: all.first,
        route: {
          ...all.route,
          reason: `no candidate available now (${why}); waiting on ${all.first.upstream}`,
        },
      };
    },
  };
}

function median(values: readonly number[]): number | null {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}
