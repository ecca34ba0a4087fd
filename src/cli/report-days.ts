/**
 * The days of `h2h-sync report` (docs/settlement.md): a day is `YYYY-MM-DD` in a fixed offset
 * from UTC (`--tz`, default UTC), from its midnight to the next. Loads no package: the command's
 * definition parses its options with it.
 */

const DAY = /^(\d{4})-(\d{2})-(\d{2})$/u;
const OFFSET = /^([+-])(\d{2}):(\d{2})$/u;
const MS_PER_DAY = 86_400_000;

/** Why `text` is not a day (`YYYY-MM-DD`, a date of the calendar), or undefined. */
export function dayProblem(text: string): string | undefined {
  const match = DAY.exec(text);
  if (match) {
    const [, year, month, day] = match.map(Number) as [number, number, number, number];
    const date = new Date(Date.UTC(year, month - 1, day));
    if (date.getUTCFullYear() === year && date.getUTCMonth() === month - 1 && date.getUTCDate() === day) {
      return undefined;
    }
  }
  return `expected a day as YYYY-MM-DD, e.g. 2026-11-28 (got "${text}")`;
}

/**
 * The offset from UTC in minutes of `text`: `UTC`, `Z`, or `+HH:MM`/`-HH:MM` up to 14 hours; else
 * why not. A zone name is refused: in a zone with daylight saving a day can have 23 or 25 hours.
 */
export function parseUtcOffset(text: string): { minutes: number } | { problem: string } {
  if (text === 'UTC' || text === 'Z') return { minutes: 0 };
  const match = OFFSET.exec(text);
  if (match) {
    const minutes = Number(match[2]) * 60 + Number(match[3]);
    if (Number(match[3]) < 60 && minutes <= 14 * 60)
      return { minutes: match[1] === '-' ? -minutes : minutes };
  }
  return {
    problem: `expected UTC or a fixed offset from UTC as +HH:MM or -HH:MM, e.g. +07:00 (got "${text}"; a zone name is not accepted)`,
  };
}

/** `minutes` as `+HH:MM` (`+00:00` for UTC). */
export function formatUtcOffset(minutes: number): string {
  const abs = Math.abs(minutes);
  const hh = String(Math.floor(abs / 60)).padStart(2, '0');
  const mm = String(abs % 60).padStart(2, '0');
  return `${minutes < 0 ? '-' : '+'}${hh}:${mm}`;
}

/** When `day` starts (ms since the epoch) at `offsetMinutes` from UTC. */
export function dayStart(day: string, offsetMinutes: number): number {
  return Date.parse(`${day}T00:00:00.000Z`) - offsetMinutes * 60_000;
}

/** Every day from `from` to `to`, both included (none when `from` is after `to`). */
export function daysBetween(from: string, to: string): string[] {
  const days: string[] = [];
  for (let t = Date.parse(`${from}T00:00:00.000Z`); t <= Date.parse(`${to}T00:00:00.000Z`); t += MS_PER_DAY) {
    days.push(new Date(t).toISOString().slice(0, 10));
  }
  return days;
}
