/**
 * Node's arguments for a child process that runs a TypeScript program of test/fixtures/: the test
 * build's loader (scripts/test-build/), as the test files themselves run. Through tsx the child
 * would spend about half a second of CPU more starting up.
 */
export const FIXTURE_EXEC_ARGV = [
  '--import',
  new URL('../../scripts/test-build/register.mjs', import.meta.url).href,
];
