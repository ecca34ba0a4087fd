/** A one-line progress bar on a terminal; nothing at all when the stream is not a TTY. */
export interface ProgressLine {
  /** Redraws the line: `[#####-----] done/total detail`. Throttled to about ten redraws a second. */
  update(done: number, total: number, detail?: string): void;
  /** Clears the line, so what follows starts on a clean one. */
  done(): void;
}

const NO_PROGRESS: ProgressLine = { update() {}, done() {} };

/**
 * A progress line on `stream` (default stderr, so stdout stays clean for tables and `--json`),
 * only when it is a terminal and `enabled` (default true): piped or redirected output never gets
 * control characters.
 */
export function createProgressLine(
  stream: NodeJS.WriteStream = process.stderr,
  {
    width = 24,
    minIntervalMs = 100,
    enabled = true,
  }: { width?: number; minIntervalMs?: number; enabled?: boolean } = {},
): ProgressLine {
  if (!enabled || !stream.isTTY) return NO_PROGRESS;
  let lastDrawn = 0;
  let drawn = false;
  return {
    update(done, total, detail = '') {
      const now = Date.now();
      if (drawn && done < total && now - lastDrawn < minIntervalMs) return;
      lastDrawn = now;
      drawn = true;
      const filled = total > 0 ? Math.min(width, Math.round((done / total) * width)) : 0;
      const bar = `[${'#'.repeat(filled)}${'-'.repeat(width - filled)}]`;
      stream.write(`\r${bar} ${done}/${total}${detail ? ` ${detail}` : ''}\x1b[K`);
    },
    done() {
      if (drawn) stream.write('\r\x1b[K');
      drawn = false;
    },
  };
}
