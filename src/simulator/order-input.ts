import { type OrderData, partnerRefProblem } from '../upstream/model.js';
import { isHttpUrl } from './fixture.js';
import { upstreamError } from './sim-errors.js';

/** A POST /orders body that has the right shape (not yet checked against the catalog). */
export interface ValidOrderInput {
  product_code: string | undefined;
  product_id: string | undefined;
  partner_ref: string | undefined;
  data: OrderData;
  callback_url: string | null;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * Checks the shape of a POST /orders body (spec §2 "Order input", decisions.md). Throws 400
 * VALIDATION_ERROR whose `error` starts with the offending field, e.g. `partner_ref: at most 64 characters (Unicode code points), got 65`.
 */
export function parseOrderInput(body: unknown): ValidOrderInput {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw invalid('body', 'must be a JSON object');
  }
  const input = body as Record<string, unknown>;
  const productCode = optionalString(input, 'product_code');
  const productId = optionalString(input, 'product_id');
  if (productCode === undefined && productId === undefined) {
    throw invalid('product_code', 'product_code or product_id is required');
  }
  if (productId !== undefined && !UUID.test(productId)) throw invalid('product_id', 'must be a UUID');

  const partnerRef = optionalString(input, 'partner_ref');
  const partnerRefRefusal = partnerRef === undefined ? undefined : partnerRefProblem(partnerRef);
  if (partnerRefRefusal) throw upstreamError('VALIDATION_ERROR', partnerRefRefusal);

  const data = input.data;
  if (data === undefined || data === null) throw invalid('data', 'is required');
  if (typeof data !== 'object' || Array.isArray(data)) throw invalid('data', 'must be an object');
  for (const [key, value] of Object.entries(data)) {
    if (typeof value !== 'string') throw invalid(`data.${key}`, 'must be a string');
  }

  let callbackUrl: string | null = null;
  if (input.callback_url !== undefined && input.callback_url !== null) {
    if (typeof input.callback_url !== 'string' || !isHttpUrl(input.callback_url)) {
      throw invalid('callback_url', 'must be an absolute http:// or https:// URL');
    }
    callbackUrl = input.callback_url;
  }

  return {
    product_code: productCode,
    product_id: productId,
    partner_ref: partnerRef,
    data: data as OrderData,
    callback_url: callbackUrl,
  };
}

/** Absent or null is "not given"; anything else must be a non-empty string. */
function optionalString(input: Record<string, unknown>, field: string): string | undefined {
  const value = input[field];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string' || value === '') throw invalid(field, 'must be a non-empty string');
  return value;
}

function invalid(field: string, reason: string) {
  return upstreamError('VALIDATION_ERROR', `${field}: ${reason}`);
}
