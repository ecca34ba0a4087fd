import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { z } from 'zod';
import { ConfigError } from '../config/config-error.js';
import { list } from '../config/variables.js';
import { DEFAULT_UPSTREAM, isDefaultUpstream, UPSTREAM_NAME_PATTERN, UPSTREAM_NAME_RULE } from './model.js';

/**
 * The upstreams a deployment holds accounts with (docs/upstreams.md): the file named by
 * `H2H_UPSTREAMS_FILE`, each upstream's key and webhook secrets from the environment, and the
 * upstream named {@link DEFAULT_UPSTREAM}, which is today's single upstream (`H2H_BASE_URL`,
 * `H2H_API_KEY`, `H2H_API_SECRET`). Read once by `loadConfig`; a leaf module (zod and node only).
 */

/** One upstream account, as every component receives it. */
export interface UpstreamAccount {
  name: string;
  /** Base URL including `/v1/member-api`; undefined when not configured (a command that calls it says so). */
  baseUrl: string | undefined;
  /** Undefined when not set; a command that calls the upstream says which variable to set. */
  apiKey: string | undefined;
  /** Webhook secrets, newest first; empty when not set. */
  secrets: string[];
  /** Calls per rate window on this account. */
  rateLimit: number;
  /** Preference under the `priority` policy: lower first. */
  priority: number;
  /** The variables its key and secrets are read from, for messages. */
  variables: { apiKey: string; secret: string };
}

const entrySchema = z.strictObject({
  name: z.string().regex(UPSTREAM_NAME_PATTERN, UPSTREAM_NAME_RULE),
  base_url: z.url({ protocol: /^https?$/ }).optional(),
  rate_limit: z.int().min(1).optional(),
  priority: z.int().optional(),
});

const fileSchema = z.strictObject({
  upstreams: z
    .array(
      entrySchema
        .refine((entry) => isDefaultUpstream(entry.name) || entry.base_url !== undefined, {
          path: ['base_url'],
          message: 'is required (only the default upstream takes H2H_BASE_URL)',
        })
        .refine((entry) => !isDefaultUpstream(entry.name) || entry.base_url === undefined, {
          path: ['base_url'],
          message: "is the default upstream's H2H_BASE_URL: set it there, not in the file",
        })
        .refine((entry) => !isDefaultUpstream(entry.name) || entry.rate_limit === undefined, {
          path: ['rate_limit'],
          message: "is the default upstream's H2H_RATE_LIMIT: set it there, not in the file",
        }),
    )
    .min(1, 'must list at least one upstream')
    .superRefine((entries, ctx) => {
      // Orders are placed and polled on the default upstream until routing is built, so its
      // webhooks must keep their path (docs/upstreams.md, "Built so far").
      if (entries.length > 0 && !entries.some((entry) => isDefaultUpstream(entry.name))) {
        ctx.addIssue({
          code: 'custom',
          message: 'must list the default upstream ({"name": "default"}): orders are placed on it',
        });
      }
      const seen = new Set<string>();
      entries.forEach((entry, i) => {
        if (seen.has(entry.name)) {
          ctx.addIssue({ code: 'custom', path: [i, 'name'], message: `"${entry.name}" is listed twice` });
        }
        seen.add(entry.name);
      });
    }),
});

/** The environment variables of an upstream's key and secrets: `H2H_UPSTREAM_<NAME>_API_KEY`, `…_API_SECRET`. */
export function accountVariables(name: string): UpstreamAccount['variables'] {
  if (isDefaultUpstream(name)) return { apiKey: 'H2H_API_KEY', secret: 'H2H_API_SECRET' };
  const stem = `H2H_UPSTREAM_${name.toUpperCase().replaceAll('-', '_')}`;
  return { apiKey: `${stem}_API_KEY`, secret: `${stem}_API_SECRET` };
}

/** What the accounts are made of besides the file: today's settings and the environment. */
export interface AccountSources {
  /** `H2H_UPSTREAMS_FILE`, when set. */
  file: string | undefined;
  /** The default upstream's settings. */
  baseUrl: string | undefined;
  apiKey: string | undefined;
  secrets: readonly string[];
  /** `H2H_RATE_LIMIT`: every account's limit unless its entry sets one. */
  rateLimit: number;
  env: NodeJS.ProcessEnv;
}

/**
 * Every upstream account: without a file, the default upstream alone; with one, its upstreams
 * in its order. Throws {@link ConfigError} naming the file, the upstream and the field.
 */
export function readUpstreamAccounts(sources: AccountSources): UpstreamAccount[] {
  const defaultAccount = (): UpstreamAccount => ({
    name: DEFAULT_UPSTREAM,
    baseUrl: sources.baseUrl,
    apiKey: sources.apiKey,
    secrets: [...sources.secrets],
    rateLimit: sources.rateLimit,
    priority: 0,
    variables: accountVariables(DEFAULT_UPSTREAM),
  });
  if (sources.file === undefined) return [defaultAccount()];
  const path = resolve(sources.file);
  const entries = parseFile(path);
  return entries.map((entry, i): UpstreamAccount => {
    const variables = accountVariables(entry.name);
    if (isDefaultUpstream(entry.name)) {
      return { ...defaultAccount(), priority: entry.priority ?? i };
    }
    const env = (name: string) => (sources.env[name] === '' ? undefined : sources.env[name]);
    return {
      name: entry.name,
      baseUrl: entry.base_url,
      apiKey: env(variables.apiKey),
      secrets: list.parse(env(variables.secret) ?? ''),
      rateLimit: entry.rate_limit ?? sources.rateLimit,
      priority: entry.priority ?? i,
      variables,
    };
  });
}

function parseFile(path: string): z.output<typeof fileSchema>['upstreams'] {
  const problem = (message: string) =>
    new ConfigError(`H2H_UPSTREAMS_FILE ${path} is not valid: ${message} (docs/upstreams.md)`);
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw problem(`it cannot be read (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`);
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    throw problem(`it is not JSON (${(error as Error).message})`);
  }
  const parsed = fileSchema.safeParse(json);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((issue) => {
      const [list, index, ...field] = issue.path;
      const raw =
        list === 'upstreams' && typeof index === 'number'
          ? (json as { upstreams?: { name?: unknown }[] }).upstreams?.[index]
          : undefined;
      const where =
        typeof index === 'number'
          ? `upstreams[${index}]${typeof raw?.name === 'string' ? ` ("${raw.name}")` : ''}${field.length > 0 ? `.${field.join('.')}` : ''}`
          : issue.path.join('.') || 'the file';
      return `${where}: ${issue.message}`;
    });
    throw problem(lines.join('; '));
  }
  return parsed.data.upstreams;
}
