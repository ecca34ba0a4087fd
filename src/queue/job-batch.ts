import { Job, type Queue } from 'bullmq';
import type { Redis } from 'ioredis';

/**
 * Adds a batch of jobs to one BullMQ queue with one Redis command, each stored exactly as
 * `queue.add(name, data, {jobId})` stores it: BullMQ's own add script runs once per job inside
 * a single script call, with BullMQ's own encoding of the arguments and options (computed for
 * the batch's first job; the others differ only in id and data). A batch thus costs one
 * command to build, send, run and journal instead of one per job, and Redis runs it atomically.
 *
 * For each job it also answers whether a job with that id was already stored just before its
 * add (a duplicate: BullMQ's script then adds nothing and answers the existing id). This is
 * exact, even for two jobs with the same id in one batch.
 */

/** One job of a batch. The queue's default job options apply, as with `queue.add`. */
export interface BatchedJob<DataType> {
  /**
   * Custom job id, the dedupe key: BullMQ refuses one that reads as an integer or contains
   * `:` (see job-ids.ts).
   */
  jobId: string;
  data: DataType;
}

/** What happened to one job of a batch. */
export type BatchedJobResult =
  | {
      ok: true;
      jobId: string;
      /** A job with this id was already stored, so nothing was added. */
      existed: boolean;
    }
  | { ok: false; jobId: string; error: Error };

/**
 * Adds a batch (all jobs named alike); rejects when Redis refuses or fails the command as a
 * whole, in which case nothing can be said about any job of the batch.
 */
export type BatchedJobAdder<DataType> = (
  jobs: readonly BatchedJob<DataType>[],
) => Promise<BatchedJobResult[]>;

/** What BullMQ's `addJobToTransaction` hands to the client: a script name and its KEYS, then ARGV. */
interface RecordedCommand {
  name: string;
  args: (string | Buffer | number)[];
}

/** The part of BullMQ's Redis backend used here: public, for batching inserts onto one transaction. */
interface AddJobBackend {
  addJobToTransaction(client: unknown, job: unknown, jobId: string): Promise<string>;
}

/** The part of ioredis used here: the scripts BullMQ defined on the connection. */
interface ScriptHost {
  scriptsSet: Record<string, { lua: string; numberOfKeys: number | null } | undefined>;
}

/**
 * The batch script around BullMQ's add script (whose ARGV are the msgpack'd arguments, the
 * JSON data and the msgpack'd options, the arguments starting with the key prefix and the job
 * id). ARGV[1] and ARGV[2] are BullMQ's arguments and options for the batch's first job; then
 * each job brings its id and its data. Answers {existed (0|1), BullMQ's answer} per job.
 */
function batchScript(addScript: string): string {
  return `local function addOne(KEYS, ARGV)
${addScript}
end
local args = cmsgpack.unpack(ARGV[1])
local opts = cmsgpack.unpack(ARGV[2])
local results = {}
for i = 3, #ARGV, 2 do
  local jobId = ARGV[i]
  args[2] = jobId
  opts['jobId'] = jobId
  results[#results + 1] = redis.call('EXISTS', args[1] .. jobId)
  results[#results + 1] = addOne(KEYS, {cmsgpack.pack(args), ARGV[i + 1], cmsgpack.pack(opts)})
end
return results`;
}

/** BullMQ refuses these custom ids (Job.validateOptions). */
function invalidJobId(jobId: string): string | undefined {
  if (jobId === '' || `${Number.parseInt(jobId, 10)}` === jobId)
    return 'a custom job id cannot be an integer';
  if (jobId.includes(':')) return 'a custom job id cannot contain ":"';
  return undefined;
}

/**
 * Creates the batch adder of `queue` for jobs named `name`. `redis` must be the ioredis client
 * the queue uses as its connection.
 */
export function createBatchedJobAdder<DataType>(
  queue: Queue<DataType>,
  redis: Redis,
  name: string,
): BatchedJobAdder<DataType> {
  const backend = queue.backend as unknown as AddJobBackend;
  const scripts = (redis as unknown as ScriptHost).scriptsSet;
  const commands = redis as unknown as Record<
    string,
    (...args: RecordedCommand['args']) => Promise<unknown[]>
  >;
  let recorded: RecordedCommand | undefined;
  // Stands in for a Redis transaction: records the command BullMQ would queue on it.
  const recorder = {
    runCommand(command: string, args: RecordedCommand['args']) {
      recorded = { name: command, args };
      return Promise.resolve('recorded');
    },
  };

  /** The command queue.add would send for this job (Queue.addJob, Job.create), without sending it. */
  function addCommandOf(jobId: string, data: DataType): RecordedCommand {
    const job = new Job(queue, name, data, { ...queue.defaultJobOptions, jobId }, jobId);
    const json = job.asJSON();
    (job as unknown as { validateOptions(json: unknown): void }).validateOptions(json);
    recorded = undefined;
    void backend.addJobToTransaction(recorder, json, jobId);
    const command = recorded as RecordedCommand | undefined;
    if (!command) throw new Error('BullMQ queued no command for the job');
    return command;
  }

  /** Defines the batch script of BullMQ's add script `addCommand` once; answers its command and key count. */
  function batchCommandOf(addCommand: string): { command: string; numberOfKeys: number } {
    const script = scripts[addCommand];
    if (!script || typeof script.numberOfKeys !== 'number') {
      throw new Error(`BullMQ's ${addCommand} script is not defined on this connection`);
    }
    const command = `h2hBatch:${addCommand}`;
    if (typeof commands[command] !== 'function') {
      redis.defineCommand(command, { lua: batchScript(script.lua), numberOfKeys: script.numberOfKeys });
    }
    return { command, numberOfKeys: script.numberOfKeys };
  }

  return async (jobs) => {
    const results: BatchedJobResult[] = new Array(jobs.length);
    const sent: number[] = [];
    const argv: RecordedCommand['args'] = [];
    let first: RecordedCommand | undefined;
    for (let i = 0; i < jobs.length; i++) {
      const { jobId, data } = jobs[i]!;
      const invalid = invalidJobId(jobId);
      if (invalid) {
        results[i] = { ok: false, jobId, error: new Error(`${invalid} (got "${jobId}")`) };
        continue;
      }
      if (!first) {
        try {
          first = addCommandOf(jobId, data);
        } catch (error) {
          results[i] = { ok: false, jobId, error: error as Error };
          continue;
        }
      }
      sent.push(i);
      // Sent as bytes: ioredis would otherwise measure and copy a string argument several times.
      argv.push(jobId, Buffer.from(JSON.stringify(data === undefined ? {} : data)));
    }
    if (!first) return results;

    await queue.waitUntilReady(); // BullMQ defines its scripts on the connection once it is up
    const { command, numberOfKeys } = batchCommandOf(first.name);
    const keys = first.args.slice(0, numberOfKeys);
    const [packedArgs, , packedOpts] = first.args.slice(numberOfKeys);
    const replies = await commands[command]!.call(redis, ...keys, packedArgs!, packedOpts!, ...argv);
    sent.forEach((index, n) => {
      const { jobId } = jobs[index]!;
      const answer = replies[2 * n + 1];
      results[index] =
        answer === jobId
          ? { ok: true, jobId, existed: replies[2 * n] === 1 }
          : {
              ok: false,
              jobId,
              error:
                answer instanceof Error
                  ? answer
                  : new Error(`BullMQ's add script refused job ${jobId} (answer ${String(answer)})`),
            };
    });
    return results;
  };
}
