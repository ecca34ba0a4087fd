import type { FastifyPluginAsync } from 'fastify';
import type { OrderStore } from '../../store/order-store.js';
import type { SchemaTypes } from '../schema-types.js';
import { errorResponses } from '../schemas.js';

const syncedAt = {
  type: 'string',
  format: 'date-time',
  nullable: true,
  description: 'null: never synced; run h2h-sync catalog sync.',
} as const;

const productQuery = {
  type: 'object',
  additionalProperties: false,
  properties: { category_code: { type: 'string', minLength: 1, description: 'Only this category.' } },
} as const;

/** A page of the local catalog: `data` items of the named schema, with when it was synced. */
const catalogPage = (items: 'Category#' | 'Product#') => ({
  type: 'object',
  required: ['data', 'synced_at'],
  properties: { data: { type: 'array', items: { $ref: items } }, synced_at: syncedAt },
});

/**
 * The local catalog (docs/api.md, "Catalog and balance"): categories and products with this
 * account's prices, read from the store, never from the upstream.
 */
export const catalogRoutes: FastifyPluginAsync<{ store: OrderStore }> = async (base, { store }) => {
  const app = base.withTypeProvider<SchemaTypes>();
  const lastSync = async () => {
    const at = await store.catalog.syncedAt();
    return at === null ? null : new Date(at).toISOString();
  };

  app.get(
    '/v1/categories',
    {
      config: { scope: 'orders:read' },
      schema: {
        summary: 'The categories of the local catalog (no upstream call), with when it was synced',
        response: { 200: catalogPage('Category#'), ...errorResponses },
      },
    },
    async () => ({ data: await store.catalog.categories(), synced_at: await lastSync() }),
  );

  app.get(
    '/v1/products',
    {
      config: { scope: 'orders:read' },
      schema: {
        summary: 'The products of the local catalog with this account’s prices (no upstream call)',
        querystring: productQuery,
        response: { 200: catalogPage('Product#'), ...errorResponses },
      },
    },
    async (request) => ({
      data: await store.catalog.products(request.query.category_code),
      synced_at: await lastSync(),
    }),
  );
};
