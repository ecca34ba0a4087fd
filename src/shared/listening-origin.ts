import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** The `http://host:port` a listening server is reached at: its bound address, IPv6 in brackets. */
export function listeningOrigin(server: Server): string {
  const { address, port, family } = server.address() as AddressInfo;
  return `http://${family === 'IPv6' ? `[${address}]` : address}:${port}`;
}
