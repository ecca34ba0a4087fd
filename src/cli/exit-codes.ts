/**
 * Exit codes of the CLI, documented in docs/cli.md: `config` also for an upstream refusal of our
 * configuration (401/403, a 404 of a route that always exists) and a blocked order. A module of
 * its own, so the entry point sets them without loading how commands print.
 */
export const EXIT = { ok: 0, failed: 1, config: 2, unknownOutcome: 3 } as const;
