/**
 * The store's SQL names its parameters (`@partner_ref`, sql/executor.ts); PostgreSQL numbers them
 * (`$1`). {@link compileNamed} rewrites a statement once per text: each distinct name becomes one
 * number, in order of first use, so a name used twice is one parameter with one type. `@` inside
 * a string literal, a quoted identifier or a comment is left alone.
 */
export interface CompiledSql {
  readonly text: string;
  /** The name of `$1`, `$2` …, in order. */
  readonly names: readonly string[];
}

const NAME = /[A-Za-z_][A-Za-z0-9_]*/y;

export function compileNamed(sql: string): CompiledSql {
  const names: string[] = [];
  let text = '';
  let i = 0;
  while (i < sql.length) {
    const c = sql[i]!;
    const skipTo = skipQuoted(sql, i);
    if (skipTo > i) {
      text += sql.slice(i, skipTo);
      i = skipTo;
      continue;
    }
    if (c === '@') {
      NAME.lastIndex = i + 1;
      const match = NAME.exec(sql);
      if (match) {
        let n = names.indexOf(match[0]);
        if (n < 0) n = names.push(match[0]) - 1;
        text += `$${n + 1}`;
        i += 1 + match[0].length;
        continue;
      }
    }
    text += c;
    i += 1;
  }
  return { text, names };
}

/** The end of a literal, quoted identifier or comment starting at `i`, else `i`. */
function skipQuoted(sql: string, i: number): number {
  const c = sql[i];
  if (c === "'" || c === '"') {
    // '' (or "") inside is the quote itself: the scan simply goes on past it.
    let j = i + 1;
    for (;;) {
      const end = sql.indexOf(c, j);
      if (end < 0) return sql.length;
      if (sql[end + 1] === c) j = end + 2;
      else return end + 1;
    }
  }
  if (c === '-' && sql[i + 1] === '-') {
    const end = sql.indexOf('\n', i);
    return end < 0 ? sql.length : end + 1;
  }
  if (c === '/' && sql[i + 1] === '*') {
    const end = sql.indexOf('*/', i + 2);
    return end < 0 ? sql.length : end + 2;
  }
  return i;
}

/**
 * The values of a compiled statement's parameters from the named `params`. A name the statement
 * uses but `params` lacks is an error naming it (better-sqlite3 refuses it too); `undefined` is
 * bound as NULL.
 */
export function valuesOf(compiled: CompiledSql, params: object | undefined): unknown[] {
  if (compiled.names.length === 0) return [];
  const source = (params ?? {}) as Record<string, unknown>;
  return compiled.names.map((name) => {
    if (!(name in source)) throw new RangeError(`missing named parameter @${name}`);
    const value = source[name];
    return value === undefined ? null : value;
  });
}
