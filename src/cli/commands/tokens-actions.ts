import type { ApiScope, ApiToken } from '../../store/api-tokens.js';
import { StoreError } from '../../store/store-error.js';
import { openContext } from '../context.js';
import { type Column, printPublicJson, printResult, runAction } from '../output.js';

const iso = (ms: number | null) => (ms === null ? '—' : new Date(ms).toISOString());

const columns: Column<ApiToken>[] = [
  { header: 'Id', cell: (t) => t.id },
  { header: 'Name', cell: (t) => t.name },
  { header: 'Scopes', cell: (t) => t.scopes.join(' ') },
  { header: 'Created', cell: (t) => iso(t.createdAt) },
  { header: 'Last used', cell: (t) => iso(t.lastUsedAt) },
  { header: 'Revoked', cell: (t) => iso(t.revokedAt) },
];

/** `tokens create`: creates a token and prints it once. */
export const tokensCreate = (flags: { name: string; scope: string[]; json?: boolean }) =>
  runAction(Boolean(flags.json), async () => {
    const context = await openContext({ store: 'create' });
    try {
      const { token, info } = await context.store!.tokens.create(flags.name, flags.scope as ApiScope[]);
      if (flags.json) {
        printPublicJson({ token, ...info });
        return;
      }
      process.stdout.write(
        `${token}\n\nToken ${info.id} (${info.name}, ${info.scopes.join(' ')}) created. ` +
          'This is the only time it is shown: store it in the shop’s secrets now.\n',
      );
    } finally {
      await context.close();
    }
  });

/** `tokens list`: every token, never its secret. */
export const tokensList = (flags: { json?: boolean }) =>
  runAction(Boolean(flags.json), async () => {
    const context = await openContext({ store: 'existing' });
    try {
      const list = await context.store!.tokens.list();
      if (flags.json) printPublicJson(list);
      else printResult(list, false, columns);
    } finally {
      await context.close();
    }
  });

/** `tokens revoke ID`. */
export const tokensRevoke = (id: string, flags: { json?: boolean }) =>
  runAction(Boolean(flags.json), async () => {
    const context = await openContext({ store: 'existing' });
    try {
      if (!(await context.store!.tokens.revoke(id))) {
        throw new StoreError(
          'TOKEN_NOT_FOUND',
          `no live token has id ${id}: h2h-sync tokens list shows them`,
        );
      }
      if (flags.json) process.stdout.write(`${JSON.stringify({ id, revoked: true })}\n`);
      else process.stdout.write(`token ${id} revoked\n`);
    } finally {
      await context.close();
    }
  });
