import { UPSTREAM_NAME_PATTERN, UPSTREAM_NAME_RULE } from '../upstream/model.js';
import { createSimulator, type Simulator } from './index.js';
import type { SimulatorOptions } from './simulator-options.js';

/**
 * Several simulated upstreams at once (docs/simulator.md, "Several upstreams"): one
 * {@link createSimulator} per upstream, each on its own port with its own fixture and options.
 */

/** One upstream to start: its name and the options of its simulator. */
export interface SimulatedUpstreamOptions extends SimulatorOptions {
  name: string;
}

/** A running simulated upstream. */
export interface SimulatedUpstream extends Simulator {
  readonly name: string;
}

/** The running upstreams. */
export interface SimulatedUpstreams {
  /** In the order they were given. */
  readonly upstreams: readonly SimulatedUpstream[];
  /** The upstream named `name`; throws for a name that was not started. */
  get(name: string): SimulatedUpstream;
  /** Closes every upstream (each one's `close`). Safe to call twice. */
  close(): Promise<void>;
}

/**
 * Starts every upstream and resolves once all listen. Rejects when a name is not valid or is
 * given twice (a RangeError), or when an upstream cannot start: its error (FixtureError,
 * RangeError, EADDRINUSE …) with `upstream "<name>": ` before its message, after closing the
 * upstreams that did start.
 */
export async function startSimulatedUpstreams(
  options: readonly SimulatedUpstreamOptions[],
): Promise<SimulatedUpstreams> {
  const seen = new Set<string>();
  options.forEach(({ name }, index) => {
    if (!UPSTREAM_NAME_PATTERN.test(name)) {
      throw new RangeError(
        `simulated upstreams[${index}].name ${JSON.stringify(name)}: ${UPSTREAM_NAME_RULE}`,
      );
    }
    if (seen.has(name)) throw new RangeError(`simulated upstreams[${index}].name: "${name}" is given twice`);
    seen.add(name);
  });

  const started = await Promise.allSettled(
    options.map(async ({ name, ...simulatorOptions }): Promise<SimulatedUpstream> => {
      try {
        return { name, ...(await createSimulator(simulatorOptions)) };
      } catch (error) {
        if (error instanceof Error) error.message = `upstream "${name}": ${error.message}`;
        throw error;
      }
    }),
  );
  const upstreams = started.flatMap((result) => (result.status === 'fulfilled' ? [result.value] : []));
  const closeAll = async () => {
    await Promise.all(upstreams.map((upstream) => upstream.close()));
  };
  const failed = started.find((result) => result.status === 'rejected');
  if (failed) {
    await closeAll();
    throw failed.reason;
  }

  let closing: Promise<void> | undefined;
  return {
    upstreams,
    get(name) {
      const upstream = upstreams.find((u) => u.name === name);
      if (!upstream) throw new RangeError(`no simulated upstream is named "${name}"`);
      return upstream;
    },
    close: () => {
      closing ??= closeAll();
      return closing;
    },
  };
}
