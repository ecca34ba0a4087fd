import type { FastifyPluginAsync } from 'fastify';
import { MAX_FEED_PAGE } from '../../store/feed.js';
import type { OrderStore } from '../../store/order-store.js';
import { MAX_FEED_SEQ } from '../input-rules.js';
import type { SchemaTypes } from '../schema-types.js';
import { errorAnswers, REQUEST_REFUSALS, TOKEN_REFUSALS } from '../schemas.js';

const feedQuery = {
  type: 'object',
  additionalProperties: false,
  properties: {
    after: {
      type: 'integer',
      minimum: 0,
      maximum: MAX_FEED_SEQ,
      default: 0,
      description: 'The last seq you handled; 0: from the oldest kept. At most 2^53 − 1.',
    },
    limit: { type: 'integer', minimum: 1, maximum: MAX_FEED_PAGE, default: 100 },
  },
} as const;

/** The change feed (docs/api.md, "The change feed"), a page at a time from the reader's cursor. */
export const eventRoutes: FastifyPluginAsync<{ store: OrderStore }> = async (base, { store }) => {
  const app = base.withTypeProvider<SchemaTypes>();
  app.get(
    '/v1/events',
    {
      config: { scope: 'orders:read' },
      schema: {
        operationId: 'listEvents',
        tags: ['events'],
        summary: 'The change feed, after a cursor',
        description:
          'Every change of every order, price change and low balance, oldest first, in one total order: keep the last `seq` you handled and read on with `after=seq`. Events are kept H2H_FEED_RETENTION_D days (docs/api.md, "The change feed").',
        querystring: feedQuery,
        response: {
          200: {
            description: 'A page of events.',
            type: 'object',
            required: ['data', 'next_after', 'has_more'],
            properties: {
              data: { type: 'array', items: { $ref: 'Event#' } },
              next_after: {
                type: 'integer',
                description: 'Pass as after to read on (unchanged when data is empty).',
              },
              has_more: { type: 'boolean' },
            },
          },
          ...errorAnswers({ ...REQUEST_REFUSALS, ...TOKEN_REFUSALS }),
        },
      },
    },
    async (request) => {
      const { after, limit } = request.query;
      const data = await store.feed.after(after, limit);
      const nextAfter = data.at(-1)?.seq ?? after;
      return { data, next_after: nextAfter, has_more: (await store.feed.lastSeq()) > nextAfter };
    },
  );
};
