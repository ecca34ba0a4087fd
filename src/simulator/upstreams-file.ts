import { readFile } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import { z } from 'zod';
import { UPSTREAM_NAME_PATTERN, UPSTREAM_NAME_RULE } from '../upstream/model.js';
import type { SimulatedUpstreamOptions } from './simulated-upstreams.js';
import { scalarOptionsSchema } from './simulator-options.js';

/**
 * The file of `h2h-sync sim --upstreams FILE` (docs/simulator.md, "Several upstreams"): the
 * upstreams to start, each with its fixture, port and simulator options, snake_case like the
 * fixtures and h2h-sync's own upstreams file. Ranges and defaults are those of the options.
 */

const option = scalarOptionsSchema.shape;

const entrySchema = z
  .strictObject({
    name: z.string().regex(UPSTREAM_NAME_PATTERN, UPSTREAM_NAME_RULE),
    /** Relative to the file's folder. */
    fixture: z.string().min(1, 'must be the path of a fixture file'),
    port: option.port.unwrap(),
    host: option.host,
    profile: option.profile,
    realistic: option.realistic,
    time_scale: option.timeScale,
    speed: option.speed,
    scale_rate_window: option.scaleRateWindow,
    seed: option.seed,
    rate_limit: option.rateLimit,
    rate_window_ms: option.rateWindowMs,
    webhook_timeout_ms: option.webhookTimeoutMs,
    faults: option.faults,
  })
  .refine((entry) => entry.time_scale === undefined || entry.speed === undefined, {
    path: ['speed'],
    message: 'give time_scale or speed, not both',
  });

const fileSchema = z.strictObject({
  upstreams: z
    .array(entrySchema)
    .min(1, 'must list at least one upstream')
    .superRefine((entries, ctx) => {
      const names = new Set<string>();
      const ports = new Set<number>();
      entries.forEach((entry, index) => {
        if (names.has(entry.name)) {
          ctx.addIssue({ code: 'custom', path: [index, 'name'], message: `"${entry.name}" is listed twice` });
        }
        if (entry.port !== 0 && ports.has(entry.port)) {
          ctx.addIssue({ code: 'custom', path: [index, 'port'], message: `${entry.port} is listed twice` });
        }
        names.add(entry.name);
        ports.add(entry.port);
      });
    }),
});

/** Thrown when an upstreams file cannot be read or does not validate; the message names the file, the upstream and the field. */
export class UpstreamsFileError extends Error {
  override readonly name = 'UpstreamsFileError';
}

/**
 * Reads and validates an upstreams file and returns the options of each upstream, ready for
 * `startSimulatedUpstreams` (fixture paths resolved against the file's folder). The fixtures
 * themselves are checked when the upstreams start.
 */
export async function readUpstreamsFile(path: string): Promise<SimulatedUpstreamOptions[]> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    throw new UpstreamsFileError(`${path}: cannot read the upstreams file: ${(error as Error).message}`);
  }
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (error) {
    throw new UpstreamsFileError(`${path}: not valid JSON: ${(error as Error).message}`);
  }
  const parsed = fileSchema.safeParse(raw);
  if (!parsed.success) {
    const problems = parsed.error.issues.slice(0, 10).map((issue) => describeIssue(issue, raw));
    throw new UpstreamsFileError(`${path} is not a valid upstreams file:\n  ${problems.join('\n  ')}`);
  }
  const folder = dirname(path);
  return parsed.data.upstreams.map((entry) => ({
    name: entry.name,
    fixture: resolve(folder, entry.fixture),
    port: entry.port,
    host: entry.host,
    profile: entry.profile,
    ...(entry.realistic !== undefined ? { realistic: entry.realistic } : {}),
    ...(entry.time_scale !== undefined ? { timeScale: entry.time_scale } : {}),
    ...(entry.speed !== undefined ? { speed: entry.speed } : {}),
    scaleRateWindow: entry.scale_rate_window,
    seed: entry.seed,
    rateLimit: entry.rate_limit,
    rateWindowMs: entry.rate_window_ms,
    webhookTimeoutMs: entry.webhook_timeout_ms,
    faults: entry.faults,
  }));
}

/** `upstreams[1] ("beta").rate_limit: <problem>`: the upstream by index and name, then the field. */
function describeIssue(issue: z.core.$ZodIssue, raw: unknown): string {
  const unknownKeys = issue.code === 'unrecognized_keys';
  const paths = unknownKeys ? issue.keys.map((key) => [...issue.path, key]) : [issue.path];
  const message = unknownKeys ? 'unknown field' : issue.message;
  return paths.map((path) => `${describePath(path, raw)}: ${message}`).join('\n  ');
}

function describePath(path: readonly PropertyKey[], raw: unknown): string {
  const [list, index, ...field] = path;
  if (list !== 'upstreams' || typeof index !== 'number') return path.map(String).join('.') || '(root)';
  const name = (raw as { upstreams: { name?: unknown }[] }).upstreams[index]?.name;
  const upstream = `upstreams[${index}]${typeof name === 'string' ? ` ("${name}")` : ''}`;
  return `${upstream}${field.map((part) => `.${String(part)}`).join('')}`;
}
