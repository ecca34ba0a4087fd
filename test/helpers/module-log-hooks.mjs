// Module hooks of module-log.mjs: every resolved URL is appended to the log synchronously, so it is
// on disk before the module that asked for it runs, whenever the process ends.
import { appendFileSync } from 'node:fs';

let logPath;

export async function initialize(data) {
  logPath = data.logPath;
}

export async function resolve(specifier, context, nextResolve) {
  const resolved = await nextResolve(specifier, context);
  appendFileSync(logPath, `${resolved.url}\n`);
  return resolved;
}
