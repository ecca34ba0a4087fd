/**
 * The demo's defaults that its `--help` shows, in a module that imports nothing: the `demo`
 * definition names them without loading the demo, which starts every part of the service.
 */

/**
 * The demo's simulator time: 50 simulated seconds per real second, so a realistic completion
 * (median 20 s, p99 3 min) takes 0.4 s median and 3.6 s at p99, and a webhook retry after
 * 1 minute comes after 1.2 s.
 */
export const DEMO_TIME_SCALE = 0.02;
