import type { Command } from 'commander';
import { API_SCOPES, type ApiScope, type ApiToken } from '../../store/api-tokens.js';
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

/** `--scope a,b --scope c` → [a, b, c]. */
const collectScopes = (value: string, previous: string[] = []) => [
  ...previous,
  ...value
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean),
];

/** Registers `tokens create|list|revoke`: the shop API's bearer tokens (docs/api.md, "Tokens"). */
export function registerTokensCommands(program: Command): void {
  const tokens = program.command('tokens').description("the shop API's bearer tokens (docs/api.md)");

  tokens
    .command('create')
    .description('create a token and print it once; only its hash is kept')
    .requiredOption('--name <name>', 'who uses it, e.g. "web shop"')
    .requiredOption(
      '--scope <scopes>',
      `one or more of ${API_SCOPES.join(', ')} (comma-separated or repeated)`,
      collectScopes,
    )
    .option('--json', 'print JSON')
    .action((flags: { name: string; scope: string[]; json?: boolean }) =>
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
      }),
    );

  tokens
    .command('list')
    .description('list tokens (never their secrets)')
    .option('--json', 'print JSON')
    .action((flags: { json?: boolean }) =>
      runAction(Boolean(flags.json), async () => {
        const context = await openContext({ store: 'existing' });
        try {
          const list = await context.store!.tokens.list();
          if (flags.json) printPublicJson(list);
          else printResult(list, false, columns);
        } finally {
          await context.close();
        }
      }),
    );

  tokens
    .command('revoke <id>')
    .description('revoke a token: every later request with it gets 401 TOKEN_REVOKED')
    .option('--json', 'print JSON')
    .action((id: string, flags: { json?: boolean }) =>
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
      }),
    );
}
