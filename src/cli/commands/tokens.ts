import type { Command } from 'commander';
import { API_SCOPES } from '../../store/api-tokens.js';

/** `--scope a,b --scope c` → [a, b, c]. */
const collectScopes = (value: string, previous: string[] = []) => [
  ...previous,
  ...value
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean),
];

/** What the commands do, loaded when one of them runs (docs/cli.md, "Adding a command"). */
const actions = () => import('./tokens-actions.js');

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
    .action(async (flags) => (await actions()).tokensCreate(flags));

  tokens
    .command('list')
    .description('list tokens (never their secrets)')
    .option('--json', 'print JSON')
    .action(async (flags) => (await actions()).tokensList(flags));

  tokens
    .command('revoke <id>')
    .description('revoke a token: every later request with it gets 401 TOKEN_REVOKED')
    .option('--json', 'print JSON')
    .action(async (id, flags) => (await actions()).tokensRevoke(id, flags));
}
