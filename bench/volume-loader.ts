// The volume bench's bulk loader: a store of n orders exactly as the write path writes them
// (volume-orders.ts, order after order), at thousands of orders a second instead of days.
//
// The first `kinds` orders (the templates) are written through the write path itself. Every
// later order i is order k = i % kinds copied: its rows of `orders`, `order_events`,
// `feed_events` and `notify_deliveries` (each row of one order names it by partner_ref) with
// k's token replaced by i's in every text (references, JSON), every time moved by
// base(i) − base(k) (the integer ms columns, and every ISO 8601 time inside a text), and the
// row ids (order ids, event ids, feed seqs, delivery ids and the seq a delivery names)
// continuing where the previous order's ended.
//
// Why it is fast: each template row is compiled once into one "cell" per column (a constant,
// the next id, a time plus the shift, or a text cut at k's token and its ISO times, so a copy's
// text is a concatenation), and a copy is its cells evaluated for i. The rows go in by a
// prepared statement (SQLite) or COPY (PostgreSQL, volume-load-targets.ts) with the copied
// tables' indexes and triggers dropped or disabled, and are rebuilt after the copy from their
// own SQL: each index by one sort; `order_counts`, which the orders' triggers keep (schema 27),
// by one `INSERT … SELECT … GROUP BY` of the copies over the same key (`orderCountKey`), added
// to the templates' counts as the insert triggers add 1 an order. The store's other counters
// follow: the feed's sequence, the endpoint's cursor, the identity sequences on PostgreSQL.
//
// `pruneBefore`: feed events committed before it are not written (their seqs are used), as
// the hourly feed pruning (H2H_FEED_RETENTION_D) run at the end would have deleted them.
// test/bench/volume-loader.test.ts builds stores both ways and compares every row of every
// table, index and trigger, on both backends.
import { openStore } from '../src/store/open-store.js';
import { parseStoreUrl } from '../src/store/store-url.js';
import {
  PER_ORDER,
  postgresTarget,
  type Row,
  sqliteTarget,
  type TableName,
  type Target,
} from './volume-load-targets.js';
import {
  addVolumeEndpoint,
  settableClock,
  VOLUME_KINDS,
  volumeBase,
  volumeToken,
  writeVolumeOrder,
} from './volume-orders.js';

const TOKEN = /v\d{10}/;
const ISO_TIME = /\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z/;

export interface LoadOptions {
  /** Orders written through the write path and copied (default {@link VOLUME_KINDS}). */
  kinds?: number;
  /** Feed events committed before this (ms) are left out, as pruning would have deleted them. */
  pruneBefore?: number;
  /** Orders copied per transaction (default 20,000). */
  chunk?: number;
  /** Called after each transaction with the orders in the store so far. */
  onProgress?: (done: number) => void;
}

/** Builds a store of `n` volume orders at `url` (an empty database): the write path's, copied. */
export async function loadVolumeStore(url: string, n: number, options: LoadOptions = {}): Promise<void> {
  const kinds = options.kinds ?? VOLUME_KINDS;
  const written = Math.min(n, kinds);
  const clock = settableClock(volumeBase(0) - 1000);
  const store = await openStore(url, { now: clock.now, role: 'bench' });
  try {
    const endpointId = await addVolumeEndpoint(store);
    for (let i = 0; i < written; i++) await writeVolumeOrder(store, clock, endpointId, i, kinds);
    if (options.pruneBefore !== undefined && n <= kinds) {
      clock.set(options.pruneBefore);
      await store.feed.prune(0);
    }
  } finally {
    await store.close();
  }
  options.onProgress?.(written);
  if (n <= kinds) return;
  const location = parseStoreUrl(url);
  const target =
    location.backend === 'postgres' ? await postgresTarget(location.url) : sqliteTarget(location.path);
  try {
    await copyOrders(target, n, kinds, options);
  } finally {
    await target.close();
  }
}

/** Order i as its copy of order k sees it. */
interface Copy {
  shift: number;
  /** The first id of its rows in each table. */
  first: Record<TableName, number>;
  /** What goes into the holes of k's texts: i's token, then each of k's text times moved. */
  holes: string[];
}

/** One column of a template row: its value in a copy. */
type Cell = (copy: Copy) => unknown;

/** A template row compiled: its table, its cells in the table's column order, its time. */
interface CompiledRow {
  table: TableName;
  cells: Cell[];
  /** A feed event's time (0 for other rows), for the pruning: the copy's is this plus its shift. */
  time: number;
}

/** A template order: its compiled rows in copy order, how many rows of each table, its text times. */
interface Template {
  rows: CompiledRow[];
  count: Record<TableName, number>;
  /** The distinct ISO times in its texts (ms): a copy formats each once. */
  times: number[];
}

/**
 * Template order k's rows compiled. Its ids become the copy's first id plus the row's place
 * among the order's rows of its table (as the write path hands them out, in order), and the
 * seq a delivery names the copy's seq of the same feed event.
 */
function compileTemplate(
  k: number,
  rows: Record<TableName, Row[]>,
  columns: Record<TableName, string[]>,
): Template {
  const token = volumeToken(k);
  const textParts = new RegExp(`(${token})|(${ISO_TIME.source})`, 'g');
  const seqIndex = new Map(rows.feed_events.map((row, index) => [Number(row.seq), index]));
  const textTimes: number[] = [];
  // A text's hole: 0 for the token, 1 + the time's place in textTimes for a time.
  const holeOf = (match: RegExpMatchArray) => {
    if (match[1]) return 0;
    const ms = Date.parse(match[2]!);
    if (!textTimes.includes(ms)) textTimes.push(ms);
    return 1 + textTimes.indexOf(ms);
  };
  const compiled: CompiledRow[] = [];
  for (const { table, id, times } of PER_ORDER) {
    rows[table].forEach((row, index) => {
      const cells = columns[table].map((column): Cell => {
        const value = row[column];
        if (column === id) return (copy) => copy.first[table] + index;
        if (value === null || value === undefined) return () => value;
        if (table === 'notify_deliveries' && column === 'seq') {
          const at = seqIndex.get(Number(value));
          if (at === undefined) throw new Error(`a delivery of feed event ${value}, not order ${k}'s`);
          return (copy) => copy.first.feed_events + at;
        }
        if ((times as readonly string[]).includes(column)) {
          const ms = Number(value);
          return (copy) => ms + copy.shift;
        }
        if (typeof value === 'string') return compileText(value, textParts, holeOf);
        return () => value;
      });
      const time = table === 'feed_events' ? Number(row.timestamp) : 0;
      compiled.push({ table, cells, time });
    });
  }
  return { rows: compiled, count: countRows(rows), times: textTimes };
}

function countRows(rows: Record<TableName, Row[]>): Record<TableName, number> {
  return Object.fromEntries(PER_ORDER.map(({ table }) => [table, rows[table].length])) as Record<
    TableName,
    number
  >;
}

/**
 * A text cut at the template's token and its ISO times: the copy's is the pieces between, with
 * the copy's token and each time moved by the shift (`new Date(t + shift).toISOString()`).
 */
function compileText(text: string, parts: RegExp, holeOf: (match: RegExpMatchArray) => number): Cell {
  const pieces: string[] = [];
  const holes: number[] = [];
  let at = 0;
  for (const match of text.matchAll(parts)) {
    pieces.push(text.slice(at, match.index));
    holes.push(holeOf(match));
    at = match.index + match[0].length;
  }
  if (holes.length === 0) return () => text;
  pieces.push(text.slice(at));
  return (copy) => {
    let out = pieces[0]!;
    for (let h = 0; h < holes.length; h++) out += copy.holes[holes[h]!]! + pieces[h + 1]!;
    return out;
  };
}

/** The index of the order a row belongs to, from the token in its partner_ref. */
function orderOf(row: Row): number {
  const match = TOKEN.exec(String(row.partner_ref ?? ''));
  if (!match) throw new Error(`a row without an order's token: ${JSON.stringify(row).slice(0, 200)}`);
  return Number(match[0].slice(1));
}

async function readTemplates(
  target: Target,
  kinds: number,
): Promise<{ templates: Template[]; columns: Record<TableName, string[]> }> {
  const rows: Array<Record<TableName, Row[]>> = Array.from({ length: kinds }, () => ({
    orders: [],
    order_events: [],
    feed_events: [],
    notify_deliveries: [],
  }));
  const columns = {} as Record<TableName, string[]>;
  for (const { table, id } of PER_ORDER) {
    columns[table] = await target.columns(table);
    for (const row of await target.all(`SELECT * FROM ${table} ORDER BY ${id}`)) {
      if (row.partner_ref === null)
        throw new Error(`${table} holds a row of no order: the loader copies orders only`);
      rows[orderOf(row)]![table].push(row);
    }
  }
  const outbox = await target.all('SELECT COUNT(*) AS n FROM notify_outbox');
  if (Number(outbox[0]!.n) !== 0) throw new Error('the template left notifications in the outbox');
  const ledger = await target.all('SELECT COUNT(*) AS n FROM balance_ledger');
  if (Number(ledger[0]!.n) !== 0)
    throw new Error('the template wrote balance_ledger rows, which the loader does not sum');
  return { templates: rows.map((r, k) => compileTemplate(k, r, columns)), columns };
}

async function maxOf(target: Target, table: string, column: string): Promise<number> {
  const [row] = await target.all(`SELECT MAX(${column}) AS n FROM ${table}`);
  return Number(row?.n ?? 0);
}

async function copyOrders(target: Target, n: number, kinds: number, options: LoadOptions): Promise<void> {
  const { templates, columns } = await readTemplates(target, kinds);
  // The feed's seqs continue from the counter (a pruned event's seq is used all the same).
  const [counter] = await target.all(target.feedCounterSql);
  const next: Record<TableName, number> = {
    orders: (await maxOf(target, 'orders', 'id')) + 1,
    order_events: (await maxOf(target, 'order_events', 'id')) + 1,
    feed_events: Number(counter?.n ?? 0) + 1,
    notify_deliveries: (await maxOf(target, 'notify_deliveries', 'id')) + 1,
  };
  const firstCopiedOrder = next.orders;
  const pruneBefore = options.pruneBefore ?? Number.NEGATIVE_INFINITY;
  const chunk = options.chunk ?? 20_000;
  await target.begin(columns);
  for (let from = kinds; from < n; from += chunk) {
    const to = Math.min(n, from + chunk);
    for (let i = from; i < to; i++) {
      const k = i % kinds;
      const template = templates[k]!;
      const shift = volumeBase(i) - volumeBase(k);
      const holes = [volumeToken(i), ...template.times.map((ms) => new Date(ms + shift).toISOString())];
      const copy: Copy = { shift, first: { ...next }, holes };
      for (const row of template.rows) {
        if (row.table === 'feed_events' && row.time + copy.shift < pruneBefore) continue;
        target.add(
          row.table,
          row.cells.map((cell) => cell(copy)),
        );
      }
      for (const { table } of PER_ORDER) next[table] += template.count[table];
    }
    await target.commit();
    options.onProgress?.(to);
  }
  await target.finish({ lastSeq: next.feed_events - 1, pruneBefore: options.pruneBefore, firstCopiedOrder });
}
