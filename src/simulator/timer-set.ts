/**
 * Every timer the simulator's state depends on (status steps, webhook retries, holds), so that a
 * reset or close cancels them all at once. Timers are unref'd: the HTTP server is what keeps a
 * process alive, never a webhook retry due in six hours.
 */
export class TimerSet {
  private readonly pending = new Set<NodeJS.Timeout>();
  private closed = false;

  /** Runs `task` after `delayMs` unless {@link clearAll} comes first; after {@link close}, never. */
  schedule(delayMs: number, task: () => void): NodeJS.Timeout | undefined {
    if (this.closed) return undefined;
    const timer = setTimeout(() => {
      this.pending.delete(timer);
      task();
    }, delayMs);
    timer.unref();
    this.pending.add(timer);
    return timer;
  }

  cancel(timer: NodeJS.Timeout | undefined): void {
    if (timer === undefined) return;
    clearTimeout(timer);
    this.pending.delete(timer);
  }

  /** A promise resolved after `delayMs`; never settled when {@link clearAll} or {@link close} comes first. */
  sleep(delayMs: number): Promise<void> {
    return new Promise((resolve) => this.schedule(delayMs, resolve));
  }

  clearAll(): void {
    for (const timer of this.pending) clearTimeout(timer);
    this.pending.clear();
  }

  /** Clears every timer, and later ones never run. */
  close(): void {
    this.closed = true;
    this.clearAll();
  }

  get size(): number {
    return this.pending.size;
  }
}
