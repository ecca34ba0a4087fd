import { readFileSync } from 'node:fs';

/** CPU use read from /proc, for the benches' cost per request (Linux only). */

/** CPU time a process has used so far, in ms (user, system); undefined off Linux. */
export function cpuTimes(pid: number | undefined): { user: number; system: number } | undefined {
  if (pid === undefined) return undefined;
  try {
    // Fields 14 and 15 of /proc/<pid>/stat (utime, stime), after the parenthesised command name.
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
    return { user: Number(fields[11]) * 10, system: Number(fields[12]) * 10 }; // USER_HZ is 100
  } catch {
    return undefined;
  }
}

/** Idle and total jiffies of the whole machine so far (first line of /proc/stat); undefined off Linux. */
export function machineTicks(): { idle: number; total: number } | undefined {
  try {
    const values = readFileSync('/proc/stat', 'utf8')
      .split('\n')[0]!
      .trim()
      .split(/\s+/)
      .slice(1)
      .map(Number);
    return { idle: (values[3] ?? 0) + (values[4] ?? 0), total: values.reduce((a, b) => a + b, 0) };
  } catch {
    return undefined;
  }
}
