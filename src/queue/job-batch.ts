import { Job, type Queue } from 'bullmq';
import type { Redis } from 'ioredis';

/**
 * Adds a batch of jobs to one BullMQ queue with one Redis command, each stored as
 * `queue.add(name, data, {jobId})` stores it (the jobs of a batch share one timestamp, taken
 * when it is sent). A batch thus costs one command to build, send, run and journal instead of
 * one per job, and Redis runs it atomically.
 *
 * BullMQ encodes the keys, arguments and options of a job of the queue once (webhook jobs
 * differ only in id, data and timestamp); a Lua script then does for every job what BullMQ's
 * `addStandardJob` script does for a job without parent, delay, priority or deduplication,
 * with the same keys, fields and events, job after job. It is not BullMQ's script run once per
 * job: Redis 7.0 pays about 3 µs per command a script calls, BullMQ's script calls ten per job
 * and decodes its arguments each time; this one calls five per job and does the rest once per
 * batch (docs/performance.md, "Receiver"). test/receiver/job-batch.test.ts compares every key it
 * writes with what `queue.add` writes; run it whenever BullMQ is upgraded.
 *
 * For each job it also answers whether a job with that id was already stored just before its
 * add (a duplicate: like BullMQ, the script then adds nothing and records a `duplicated`
 * event). This is exact, even for two jobs with the same id in one batch.
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

/** KEYS of BullMQ's addStandardJob, in its order; the recorded command starts with them. */
const ADD_SCRIPT_KEYS = 9;

/** The name the batch script is defined under on the connection. */
const BATCH_COMMAND = 'h2hBatchAdd';

/**
 * KEYS are those of BullMQ's add script (wait, paused, meta, id, completed, delayed, active,
 * events, marker); ARGV[1] and ARGV[2] are BullMQ's msgpack'd arguments and options of the
 * template job (the arguments start with the key prefix, the template's id, the name and its
 * timestamp: only the prefix and the name are used); ARGV[3] is the timestamp of the batch; then
 * each job brings its id and its JSON data. Answers {existed (0|1), job id} per job.
 *
 * Each job is complete (hash, events, wait list) before the next one starts, as with one
 * `queue.add` after another: should the script fail part-way, every job before the failure is
 * queued, so a retried delivery that finds its job is rightly a duplicate.
 *
 * What BullMQ's script does per job and this does once per batch, with the same end state:
 * increment the id counter (BullMQ increments it for every add, duplicates included), read the
 * queue's meta (maxLenEvents, paused, concurrency: no job of the batch changes them) and add the
 * marker (the same member every time; added with the first new job, as BullMQ does).
 */
const BATCH_ADD_SCRIPT = `
local rcall = redis.call
local args = cmsgpack.unpack(ARGV[1])
local opts = cmsgpack.unpack(ARGV[2])
if args[5] or args[8] or args[9] or opts['de'] then
  return redis.error_reply('h2h batch add: only jobs without parent, repeat or deduplication')
end
local prefix, name, timestamp = args[1], args[3], ARGV[3]
local metaKey, eventsKey = KEYS[3], KEYS[8]
rcall('INCRBY', KEYS[4], (#ARGV - 3) / 2)
local meta = rcall('HMGET', metaKey, 'opts.maxLenEvents', 'paused', 'concurrency')
local maxEvents = meta[1]
if not maxEvents then
  maxEvents = 10000
  rcall('HSET', metaKey, 'opts.maxLenEvents', maxEvents)
end
local pausedOrMaxed = meta[2] and true or false
if not pausedOrMaxed and meta[3] then
  pausedOrMaxed = rcall('LLEN', KEYS[7]) >= tonumber(meta[3])
end
local pushCommand = opts['lifo'] and 'RPUSH' or 'LPUSH'
local markerAdded = false
local results = {}
for i = 4, #ARGV, 2 do
  local jobId, data = ARGV[i], ARGV[i + 1]
  local jobKey = prefix .. jobId
  if rcall('EXISTS', jobKey) == 1 then
    rcall('XADD', eventsKey, 'MAXLEN', '~', maxEvents, '*', 'event', 'duplicated', 'jobId', jobId)
    results[#results + 1] = 1
  else
    -- One options table for all jobs: only the id differs, and BullMQ's encoding has the key.
    opts['jobId'] = jobId
    rcall('HMSET', jobKey, 'name', name, 'data', data, 'opts', cjson.encode(opts),
      'timestamp', timestamp, 'delay', opts['delay'] or 0, 'priority', opts['priority'] or 0)
    rcall('XADD', eventsKey, '*', 'event', 'added', 'jobId', jobId, 'name', name)
    rcall(pushCommand, KEYS[1], jobId)
    if not markerAdded and not pausedOrMaxed then
      rcall('ZADD', KEYS[9], 0, '0')
      markerAdded = true
    end
    rcall('XADD', eventsKey, 'MAXLEN', '~', maxEvents, '*', 'event', 'waiting', 'jobId', jobId)
    results[#results + 1] = 0
  end
  results[#results + 1] = jobId
end
return results`;

/** BullMQ refuses these custom ids (Job.validateOptions). */
function invalidJobId(jobId: string): string | undefined {
  if (jobId === '' || `${Number.parseInt(jobId, 10)}` === jobId)
    return 'a custom job id cannot be an integer';
  if (jobId.includes(':')) return 'a custom job id cannot contain ":"';
  return undefined;
}

/**
 * BullMQ's encoding of a job of `queue` named `name`, as queue.add would send it. Keys,
 * arguments and options are the same for every job of the queue but for the id (set per job by
 * the script) and the timestamp (sent per batch), so this is done once. Throws when BullMQ
 * refuses the queue's default job options, or when they need what the batch script does not
 * mirror: another add script than addStandardJob (delay, priority, parent), a `sizeLimit`
 * (checked by BullMQ per job, against its data) or telemetry (metadata per job).
 */
function encodeJobOf<DataType>(queue: Queue<DataType>, name: string) {
  let recorded: RecordedCommand | undefined;
  // Stands in for a Redis transaction: records the command queue.add would queue on it.
  const recorder = {
    runCommand(command: string, args: RecordedCommand['args']) {
      recorded = { name: command, args };
      return Promise.resolve('recorded');
    },
  };
  if (queue.defaultJobOptions.sizeLimit !== undefined || queue.opts.telemetry !== undefined) {
    throw new Error('batched adds do not support sizeLimit or telemetry on the queue');
  }
  const jobId = 'h2h-batch-template';
  const job = new Job(queue, name, {} as DataType, { ...queue.defaultJobOptions, jobId }, jobId);
  const json = job.asJSON();
  (job as unknown as { validateOptions(json: unknown): void }).validateOptions(json);
  void (queue.backend as unknown as AddJobBackend).addJobToTransaction(recorder, json, jobId);
  const command = recorded as RecordedCommand | undefined;
  if (!command) throw new Error('BullMQ queued no command for a job');
  if (!command.name.startsWith('addStandardJob')) {
    throw new Error(
      `batched adds mirror BullMQ's addStandardJob only; the queue's job options need ${command.name}`,
    );
  }
  // KEYS, then BullMQ's packed arguments, the job's data and its packed options.
  if (command.args.length !== ADD_SCRIPT_KEYS + 3) {
    throw new Error(
      `BullMQ's ${command.name} takes ${command.args.length} arguments; the batch script expects ${ADD_SCRIPT_KEYS} keys and 3 values`,
    );
  }
  const [packedArgs, , packedOpts] = command.args.slice(ADD_SCRIPT_KEYS);
  return { keys: command.args.slice(0, ADD_SCRIPT_KEYS), packedArgs: packedArgs!, packedOpts: packedOpts! };
}

/**
 * Creates the batch adder of `queue` for jobs named `name`. `redis` must be the ioredis client
 * the queue uses as its connection. Throws as {@link encodeJobOf} does.
 */
export function createBatchedJobAdder<DataType>(
  queue: Queue<DataType>,
  redis: Redis,
  name: string,
): BatchedJobAdder<DataType> {
  const { keys, packedArgs, packedOpts } = encodeJobOf(queue, name);
  const commands = redis as unknown as Record<
    string,
    (...args: RecordedCommand['args']) => Promise<unknown[]>
  >;
  if (typeof commands[BATCH_COMMAND] !== 'function') {
    redis.defineCommand(BATCH_COMMAND, { lua: BATCH_ADD_SCRIPT, numberOfKeys: ADD_SCRIPT_KEYS });
  }

  return async (jobs) => {
    const results: BatchedJobResult[] = new Array(jobs.length);
    const sent: number[] = [];
    const argv: RecordedCommand['args'] = [];
    for (let i = 0; i < jobs.length; i++) {
      const { jobId, data } = jobs[i]!;
      const invalid = invalidJobId(jobId);
      if (invalid) {
        results[i] = { ok: false, jobId, error: new Error(`${invalid} (got "${jobId}")`) };
        continue;
      }
      sent.push(i);
      // Sent as bytes: ioredis would otherwise measure and copy a string argument several times.
      argv.push(jobId, Buffer.from(JSON.stringify(data === undefined ? {} : data)));
    }
    if (sent.length === 0) return results;

    const timestamp = String(Date.now());
    const replies = await commands[BATCH_COMMAND]!.call(
      redis,
      ...keys,
      packedArgs,
      packedOpts,
      timestamp,
      ...argv,
    );
    sent.forEach((index, n) => {
      const { jobId } = jobs[index]!;
      // The script answers each job's own id; anything else is a bug in it.
      results[index] =
        replies[2 * n + 1] === jobId
          ? { ok: true, jobId, existed: replies[2 * n] === 1 }
          : {
              ok: false,
              jobId,
              error: new Error(`the batch add script answered no result for job ${jobId}`),
            };
    });
    return results;
  };
}
