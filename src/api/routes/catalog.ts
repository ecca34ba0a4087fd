import type { FastifyPluginAsync } from 'fastify';
import type { OrderStore } from '../../store/order-store.js';
import { ApiHttpError } from '../errors.js';
import type { SchemaTypes } from '../schema-types.js';
import { errorAnswers, REQUEST_REFUSALS, TOKEN_REFUSALS } from '../schemas.js';

/** The local catalog's routes: `GET /v1/categories` and `GET /v1/products`, read from the store. */

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

/** The most category codes a refusal of an unknown one names. */
const NAMED_CATEGORIES = 20;

/** A page of the local catalog: `data` items of the named schema, with when it was synced. */
const catalogPage = (items: 'Category#' | 'Product#', description: string) => ({
  description,
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
        operationId: 'listCategories',
        tags: ['catalog'],
        summary: 'The categories of the local catalog',
        description:
          'Read from the local copy the worker refreshes every CATALOG_REFRESH_S, never from the upstream; `synced_at` says when the upstream was read for it (docs/api.md, "Catalog and balance").',
        response: {
          200: catalogPage('Category#', 'Every category, with when the catalog was synced.'),
          ...errorAnswers({ ...REQUEST_REFUSALS, ...TOKEN_REFUSALS }),
        },
      },
    },
    async () => ({ data: await store.catalog.categories(), synced_at: await lastSync() }),
  );

  app.get(
    '/v1/products',
    {
      config: { scope: 'orders:read' },
      schema: {
        operationId: 'listProducts',
        tags: ['catalog'],
        summary: 'The products of the local catalog',
        description:
          'Each product the shop can order, once, with its candidates: every upstream’s offer of it (its code there, this account’s price, whether it is available); the product’s own price and target rules are its cheapest available candidate’s. By category, price and code; read from the local copy, never from the upstream (docs/api.md, "Catalog and balance"). A `category_code` the synced catalog does not list is 400, never an empty list.',
        querystring: productQuery,
        response: {
          200: catalogPage('Product#', 'The products, with when the catalog was synced.'),
          ...errorAnswers({
            ...REQUEST_REFUSALS,
            VALIDATION_ERROR: `${REQUEST_REFUSALS.VALIDATION_ERROR}, or a category_code the synced catalog does not list (the message names the codes it lists)`,
            ...TOKEN_REFUSALS,
          }),
        },
      },
    },
    async (request) => {
      const code = request.query.category_code;
      const data = await store.catalog.products(code);
      const syncedAt = await lastSync();
      // A typo must not read as "no products"; before the first sync nothing is checked, as for orders.
      if (code !== undefined && data.length === 0 && syncedAt !== null) {
        const known = (await store.catalog.categories()).map((category) => category.code);
        if (!known.includes(code)) {
          const more = known.length > NAMED_CATEGORIES ? ` and ${known.length - NAMED_CATEGORIES} more` : '';
          throw new ApiHttpError(
            'VALIDATION_ERROR',
            known.length === 0
              ? `category_code ${code}: the local catalog lists no categories; leave category_code out`
              : `category_code ${code} is no category of the local catalog: give one of ${known.slice(0, NAMED_CATEGORIES).join(', ')}${more} (GET /v1/categories)`,
          );
        }
      }
      return { data, synced_at: syncedAt };
    },
  );
};
