import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { StoreContext } from './store-context.js';
import { StoreError } from './store-error.js';

/**
 * The shop API's bearer tokens (docs/api.md, "Tokens"). A token reads `h2h_<id>_<secret>`: the
 * id finds its row, the secret is checked against the row's SHA-256 in constant time. Only the
 * hash is stored and the token is shown once, at creation. The secret is 32 random bytes, so a
 * fast hash is the right one (a slow password hash such as scrypt guards guessable passwords; a
 * 256-bit secret cannot be guessed, and every API request checks one).
 */

/** What a token may do: place orders, read orders and the change feed. */
export const API_SCOPES = ['orders:write', 'orders:read'] as const;
export type ApiScope = (typeof API_SCOPES)[number];

/** A token as listed: never its secret. */
export interface ApiToken {
  id: string;
  name: string;
  scopes: ApiScope[];
  createdAt: number;
  lastUsedAt: number | null;
  revokedAt: number | null;
}

/** Why a bearer token was refused. */
export type TokenRefusal = 'malformed' | 'unknown' | 'revoked';

interface TokenRow {
  id: string;
  name: string;
  scopes: string;
  secret_hash: string;
  created_at: number;
  last_used_at: number | null;
  revoked_at: number | null;
}

const TOKEN_FORMAT = /^h2h_([A-Za-z0-9]{12})_([A-Za-z0-9_-]{43})$/;
/** Last use is written at most this often per token, so reads do not turn into writes. */
const LAST_USE_EVERY_MS = 60_000;

const sha256 = (text: string) => createHash('sha256').update(text).digest();

function toApiToken(row: TokenRow): ApiToken {
  return {
    id: row.id,
    name: row.name,
    scopes: row.scopes.split(' ').filter(Boolean) as ApiScope[],
    createdAt: row.created_at,
    lastUsedAt: row.last_used_at,
    revokedAt: row.revoked_at,
  };
}

export class ApiTokens {
  readonly #context: StoreContext;

  constructor(context: StoreContext) {
    this.#context = context;
  }

  /** Creates a token; the returned `token` is the only copy of its secret. */
  async create(name: string, scopes: readonly ApiScope[]): Promise<{ token: string; info: ApiToken }> {
    if (name.trim() === '') throw new StoreError('INVALID_TOKEN_NAME', 'a token needs a name (--name)');
    const unknown = scopes.filter((s) => !(API_SCOPES as readonly string[]).includes(s));
    if (scopes.length === 0 || unknown.length > 0) {
      throw new StoreError(
        'INVALID_SCOPE',
        `scopes must be one or more of ${API_SCOPES.join(', ')}${unknown.length ? `; unknown: ${unknown.join(', ')}` : ''}`,
      );
    }
    const id = randomBytes(9).toString('base64url').replace(/[-_]/g, 'x').slice(0, 12);
    const secret = randomBytes(32).toString('base64url');
    const row: TokenRow = {
      id,
      name: name.trim(),
      scopes: [...new Set(scopes)].join(' '),
      secret_hash: sha256(secret).toString('hex'),
      created_at: this.#context.now(),
      last_used_at: null,
      revoked_at: null,
    };
    await this.#context.db.run(
      `INSERT INTO api_tokens (id, name, scopes, secret_hash, created_at, last_used_at, revoked_at)
       VALUES (@id, @name, @scopes, @secret_hash, @created_at, @last_used_at, @revoked_at)`,
      row,
    );
    return { token: `h2h_${id}_${secret}`, info: toApiToken(row) };
  }

  async list(): Promise<ApiToken[]> {
    const { db } = this.#context;
    return (
      await db.all<TokenRow>(`SELECT * FROM api_tokens ORDER BY created_at, ${db.dialect.byteOrder('id')}`)
    ).map(toApiToken);
  }

  /** Revokes a token: every later request with it is refused. False when no live token has this id. */
  async revoke(id: string): Promise<boolean> {
    const { changes } = await this.#context.db.run(
      'UPDATE api_tokens SET revoked_at = @now WHERE id = @id AND revoked_at IS NULL',
      { now: this.#context.now(), id },
    );
    return changes === 1;
  }

  /**
   * The token a bearer value names, or why it is refused. The secret is compared as SHA-256
   * digests with `timingSafeEqual`, so the time taken says nothing about how much of it matched.
   * Records the last use (at most once a minute per token).
   */
  async authenticate(
    bearer: string,
  ): Promise<{ ok: true; token: ApiToken } | { ok: false; refusal: TokenRefusal }> {
    const parts = TOKEN_FORMAT.exec(bearer);
    if (!parts) return { ok: false, refusal: 'malformed' };
    const [, id, secret] = parts as unknown as [string, string, string];
    const row = await this.#context.db.get<TokenRow>('SELECT * FROM api_tokens WHERE id = @id', { id });
    const given = sha256(secret);
    // Compared even for an unknown id, against a digest of nothing, so both take the same time.
    const stored = row ? Buffer.from(row.secret_hash, 'hex') : sha256('');
    const equal = timingSafeEqual(given, stored);
    if (!row || !equal) return { ok: false, refusal: 'unknown' };
    if (row.revoked_at !== null) return { ok: false, refusal: 'revoked' };
    const now = this.#context.now();
    if (row.last_used_at === null || now - row.last_used_at >= LAST_USE_EVERY_MS) {
      try {
        await this.#context.db.run('UPDATE api_tokens SET last_used_at = @now WHERE id = @id', { now, id });
        row.last_used_at = now;
      } catch {
        // A store busy with another writer: the last use is a convenience, never a refusal.
      }
    }
    return { ok: true, token: toApiToken(row) };
  }
}
