import type { IncomingHttpHeaders } from 'node:http';
import { normalizeIp } from './ip-address.js';
import type { MemberDirectory, MemberState } from './members.js';
import { upstreamError } from './sim-errors.js';

const BEARER = /^bearer\s+(\S+)\s*$/i;

/** The API key of spec §5: `x-api-key`, else `Authorization: Bearer <key>`. */
export function extractApiKey(headers: IncomingHttpHeaders): string | undefined {
  const header = headers['x-api-key'];
  const apiKey = (Array.isArray(header) ? header[0] : header)?.trim();
  if (apiKey) return apiKey;
  const authorization = headers.authorization;
  return authorization ? BEARER.exec(authorization)?.[1] : undefined;
}

/**
 * Spec §5 in the order the contract fixes: key missing, then key valid with H2H on and the
 * account active, then the sender IP on the whitelist. Throws the matching 401.
 */
export function authenticateMember(
  members: MemberDirectory,
  headers: IncomingHttpHeaders,
  remoteAddress: string,
): MemberState {
  const apiKey = extractApiKey(headers);
  if (apiKey === undefined) throw upstreamError('API_KEY_MISSING');
  const member = members.findByApiKey(apiKey);
  if (!member?.h2h_enabled || !member.active) throw upstreamError('INVALID_API_KEY');
  const senderIp = normalizeIp(remoteAddress);
  if (!member.whitelist.has(senderIp)) throw upstreamError('IP_NOT_WHITELISTED', senderIp);
  return member;
}
