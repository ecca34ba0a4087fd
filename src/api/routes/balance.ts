import type { FastifyPluginAsync } from 'fastify';
import type { OrderStore } from '../../store/order-store.js';
import { errorResponses } from '../schemas.js';

/** The balance (docs/api.md, "Catalog and balance"), read from the store, never from the upstream. */
export const balanceRoutes: FastifyPluginAsync<{ store: OrderStore }> = async (app, { store }) => {
  app.get(
    '/v1/balance',
    {
      config: { scope: 'orders:read' },
      schema: {
        summary: 'The balance: the last profile read, corrected by the orders seen since (no upstream call)',
        response: { 200: { $ref: 'Balance#' }, ...errorResponses },
      },
    },
    async () => store.balance.view(),
  );
};
