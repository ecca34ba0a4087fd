/**
 * h2h-sync as a library for a Node shop (docs/api.md, "In Node"): the types of the shop API and
 * its change feed, a verifier for our notifications, and the upstream client for a shop that
 * calls the upstream in-process. This file is the whole public surface: `package.json` exports
 * nothing else, so every other module stays private and may change without notice.
 */

import type { ApiErrorCode } from '../api/errors.js';

export type {
  ProductPriceChange,
  PublicBalance,
  PublicCategory,
  PublicProduct,
} from '../catalog/public-catalog.js';
export type { PublicOrder } from '../domain/public-order.js';
export type { FeedEvent, FeedEventData, FeedEventType, OrderEventType } from '../store/feed.js';
export { FEED_EVENT_TYPES, ORDER_EVENT_TYPES } from '../store/feed.js';
export type { GetOrderOptions, UpstreamClientOptions } from '../upstream/client.js';
export { UpstreamClient } from '../upstream/client.js';
export { UpstreamError, UpstreamUnreachableError } from '../upstream/errors.js';
export type { Order, OrderData, OrderInput, OrderStatus } from '../upstream/model.js';
export {
  type Notification,
  type NotificationRequestHeaders,
  NotificationVerificationError,
  verifyNotification,
} from './verify-notification.js';
export type { ApiErrorCode };

/** The body of every error answer of the shop API. */
export interface ApiErrorBody {
  error: { code: ApiErrorCode; message: string };
}
