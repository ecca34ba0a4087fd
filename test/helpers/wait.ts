/**
 * Waits until `probe` returns a truthy value (which is returned), checking every `intervalMs`.
 * This is synchronisation on an observable condition, not a sleep: it fails with `message`
 * when the condition is still false after `timeoutMs`.
 */
export async function waitFor<T>(
  probe: () => T | Promise<T>,
  {
    timeoutMs = 10_000,
    intervalMs = 20,
    message = 'condition',
  }: { timeoutMs?: number; intervalMs?: number; message?: string } = {},
): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  let last: T | undefined;
  for (;;) {
    last = await probe();
    if (last) return last as NonNullable<T>;
    if (Date.now() > deadline) {
      throw new Error(
        `timed out after ${timeoutMs} ms waiting for ${message}; last value: ${JSON.stringify(last)}`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}
