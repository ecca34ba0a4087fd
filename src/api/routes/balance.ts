import type { FastifyPluginAsync } from 'fastify';
import type { OrderStore } from '../../store/order-store.js';
import { errorAnswers, REQUEST_REFUSALS, TOKEN_REFUSALS } from '../schemas.js';

/** The balance (docs/api.md, "Catalog and balance"), read from the store, never from the upstream. */
export const balanceRoutes: FastifyPluginAsync<{ store: OrderStore }> = async (app, { store }) => {
  app.get(
    '/v1/balance',
    {
      config: { scope: 'orders:read' },
      schema: {
        operationId: 'getBalance',
        tags: ['catalog'],
        summary: 'The balance',
        description:
          'Each upstream’s balance its last profile read showed, corrected by its orders seen since, and their sums; read from the store, never from the upstream (docs/api.md, "Catalog and balance").',
        response: {
          200: { $ref: 'Balance#', description: 'The balance.' },
          ...errorAnswers({ ...REQUEST_REFUSALS, ...TOKEN_REFUSALS }),
        },
      },
    },
    async () => store.balance.view(),
  );
};
