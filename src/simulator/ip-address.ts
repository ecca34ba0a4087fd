import { isIP } from 'node:net';

const IPV4_MAPPED_PREFIX = '::ffff:';

/**
 * The form in which an address is compared and reported: an IPv4-mapped IPv6 address
 * (`::ffff:127.0.0.1`, what a dual-stack socket reports for an IPv4 peer) becomes plain IPv4.
 */
export function normalizeIp(address: string): string {
  const lower = address.toLowerCase();
  if (lower.startsWith(IPV4_MAPPED_PREFIX)) {
    const v4 = lower.slice(IPV4_MAPPED_PREFIX.length);
    if (isIP(v4) === 4) return v4;
  }
  return lower;
}

/** True for any address of 127.0.0.0/8 and for `::1` (after {@link normalizeIp}). */
export function isLoopback(address: string): boolean {
  const ip = normalizeIp(address);
  return ip === '::1' || (isIP(ip) === 4 && ip.startsWith('127.'));
}
