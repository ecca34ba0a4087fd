import { request } from 'undici';
import { type Column, printResult, runAction } from '../cli/output.js';
import { ConfigError, loadConfig } from '../config/config.js';
import { ORDER_STATUSES } from '../upstream/model.js';
import { DEFAULT_SIM_URL } from './defaults.js';
import { type Faults, faultsPatchSchema, NO_FAULTS } from './faults.js';

/** How long `sim trigger` waits for the simulator's answer. */
const SIM_REQUEST_TIMEOUT_MS = 10_000;

/** The control API's order, as `POST /__sim/orders/:ref/status` answers it (the public order). */
export interface TriggeredOrder {
  invoice_number: string;
  partner_ref: string | null;
  status: string;
  serial_number: string | null;
  message: string | null;
  [key: string]: unknown;
}

/** What `sim trigger --json` prints. */
export interface TriggerResult {
  /** The order after the change (its webhook is on its way). */
  order: TriggeredOrder;
  /** The simulator's faults after `--fault` was merged in; absent when none was given. */
  faults?: Faults;
}

/**
 * One `--fault NAME[=VALUE]` as the control API's patch. Without a value a probability is 1
 * (always), a boolean true, a list or body null (off); a list is comma-separated; `off` turns
 * any fault off (0, false, [] or null).
 */
export function parseFaultFlag(flag: string): Partial<Faults> {
  const eq = flag.indexOf('=');
  const name = eq === -1 ? flag : flag.slice(0, eq);
  const raw = eq === -1 ? undefined : flag.slice(eq + 1);
  if (!Object.hasOwn(NO_FAULTS, name)) {
    throw new ConfigError(`unknown fault ${name}: one of ${Object.keys(NO_FAULTS).join(', ')}`);
  }
  const key = name as keyof Faults;
  const off = NO_FAULTS[key];
  let value: unknown;
  if (raw === 'off') value = off;
  else if (typeof off === 'boolean')
    value = raw === undefined || raw === 'true' ? true : raw === 'false' ? false : raw;
  else if (typeof off === 'number') {
    if (raw === undefined && key.endsWith('_ms'))
      throw new ConfigError(`--fault ${name} needs a value: ${name}=MS`);
    value = raw === undefined ? 1 : Number(raw);
  } else if (Array.isArray(off)) value = raw === undefined ? [] : raw.split(',').filter((r) => r !== '');
  else value = raw ?? null;
  const parsed = faultsPatchSchema.safeParse({ [key]: value });
  if (!parsed.success) {
    const problem = parsed.error.issues[0]?.message ?? 'invalid';
    throw new ConfigError(`--fault ${flag}: ${name} ${problem}`);
  }
  return parsed.data as Partial<Faults>;
}

/** The simulator's origin: `--sim-url`, else the origin of H2H_BASE_URL, else {@link DEFAULT_SIM_URL}. */
function simOrigin(simUrl: string | undefined): string {
  const given = simUrl ?? loadConfig().settings.H2H_BASE_URL ?? DEFAULT_SIM_URL;
  try {
    return new URL(given).origin;
  } catch {
    throw new ConfigError(`--sim-url ${given} is not a URL: e.g. ${DEFAULT_SIM_URL}`);
  }
}

/** A call of the control API; an unreachable simulator is a configuration problem (exit 2). */
async function control(
  origin: string,
  path: string,
  body: unknown,
): Promise<{ status: number; body: unknown }> {
  let res: Awaited<ReturnType<typeof request>>;
  try {
    res = await request(`${origin}/__sim${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
      headersTimeout: SIM_REQUEST_TIMEOUT_MS,
      bodyTimeout: SIM_REQUEST_TIMEOUT_MS,
    });
  } catch (error) {
    throw new ConfigError(
      `no simulator answers at ${origin} (${(error as Error).message}): start \`h2h-sync sim\` or pass --sim-url`,
    );
  }
  const text = await res.body.text();
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = text;
  }
  return { status: res.statusCode, body: parsed };
}

/** A string field of an error body, if there is one. */
function field(body: unknown, name: string): string | undefined {
  const value =
    typeof body === 'object' && body !== null ? (body as Record<string, unknown>)[name] : undefined;
  return typeof value === 'string' ? value : undefined;
}

/** An error whose code the CLI prints; exit 1 (the simulator refused the change). */
class SimRefusedError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

const ORDER_COLUMNS: Column<TriggeredOrder>[] = [
  { header: 'Partner ref', cell: (o) => o.partner_ref },
  { header: 'Invoice', cell: (o) => o.invoice_number },
  { header: 'Status', cell: (o) => o.status },
  { header: 'Serial', cell: (o) => o.serial_number },
  { header: 'Message', cell: (o) => o.message },
];

/** `sim trigger REF STATUS`: moves a simulator order to a status, after switching `--fault`s on. */
export const simTrigger = (
  ref: string,
  statusArg: string,
  flags: { fault: string[]; serial?: string; message?: string; simUrl?: string; json?: boolean },
) =>
  runAction(Boolean(flags.json), async () => {
    const status = statusArg.toUpperCase();
    if (!(ORDER_STATUSES as readonly string[]).includes(status)) {
      throw new ConfigError(`unknown status ${statusArg}: one of ${ORDER_STATUSES.join(', ')}`);
    }
    const patch = Object.assign({}, ...flags.fault.map(parseFaultFlag)) as Partial<Faults>;
    const origin = simOrigin(flags.simUrl);
    const result: Partial<TriggerResult> = {};
    if (flags.fault.length > 0) {
      const answer = await control(origin, '/faults', patch);
      if (answer.status !== 200) {
        throw new ConfigError(`the simulator refused the faults: ${JSON.stringify(answer.body)}`);
      }
      result.faults = answer.body as Faults;
    }
    const answer = await control(origin, `/orders/${encodeURIComponent(ref)}/status`, {
      status,
      ...(flags.serial === undefined ? {} : { serial_number: flags.serial }),
      ...(flags.message === undefined ? {} : { message: flags.message }),
    });
    if (answer.status === 404) {
      throw new ConfigError(
        `no order ${ref} in the simulator at ${origin}: give a partner_ref or invoice number it has (GET ${origin}/__sim/orders lists them)`,
      );
    }
    if (answer.status === 409) {
      throw new SimRefusedError(
        'TRANSITION_NOT_ALLOWED',
        `the simulator refused ${field(answer.body, 'error') ?? status} for ${ref}: decisions.md's state machine does not allow it`,
      );
    }
    if (answer.status !== 200) {
      throw new SimRefusedError(
        field(answer.body, 'message') ?? `HTTP_${answer.status}`,
        `the simulator answered ${answer.status}: ${JSON.stringify(answer.body)}`,
      );
    }
    const order = answer.body as TriggeredOrder;
    if (flags.json) {
      process.stdout.write(`${JSON.stringify({ order, ...result }, null, 2)}\n`);
      return;
    }
    printResult(order, false, ORDER_COLUMNS);
    if (result.faults) {
      const on = Object.entries(result.faults).filter(
        ([name, value]) => JSON.stringify(value) !== JSON.stringify(NO_FAULTS[name as keyof Faults]),
      );
      process.stdout.write(
        `faults on: ${on.map(([name, value]) => `${name}=${JSON.stringify(value)}`).join(', ') || 'none'}\n`,
      );
    }
  });
