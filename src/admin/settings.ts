import { z } from 'zod';
import { int, LOOPBACK } from '../config/variables.js';

/**
 * The admin server's variables (README, "Settings"). The rule that keeps it on loopback without
 * a password ties ADMIN_HOST to ADMIN_USER and ADMIN_PASSWORD: src/config/config.ts applies it.
 */
export const adminVariables = z.object({
  ADMIN_HOST: z
    .string()
    .min(1)
    .default(LOOPBACK)
    .describe(
      'Address the admin server of `h2h-sync worker` (Bull Board, `/metrics`, `/healthz`) listens on. Anything but loopback requires ADMIN_USER and ADMIN_PASSWORD.',
    ),
  ADMIN_PORT: int(0)
    .max(65_535)
    .default(3001)
    .describe('Port of the admin server of `h2h-sync worker`; `0` = no admin server.'),
  ADMIN_USER: z
    .string()
    .min(1)
    .optional()
    .describe('Basic-auth user of the admin server; when set (with ADMIN_PASSWORD) every request needs it.'),
  ADMIN_PASSWORD: z
    .string()
    .min(1)
    .optional()
    .describe('Basic-auth password of the admin server, set together with ADMIN_USER.'),
});

/** The admin server's section (docs/deployment.md, "Admin view"); `auth` undefined = none (loopback only). */
export function adminSettings(config: { settings: z.output<typeof adminVariables> }) {
  const s = config.settings;
  const auth =
    s.ADMIN_USER && s.ADMIN_PASSWORD ? { user: s.ADMIN_USER, password: s.ADMIN_PASSWORD } : undefined;
  return { host: s.ADMIN_HOST, port: s.ADMIN_PORT, auth };
}
export type AdminSettings = ReturnType<typeof adminSettings>;
