import postgres from 'postgres';

export type Sql = postgres.Sql<{ bigint: number }>;
export type Tx = postgres.TransactionSql<{ bigint: number }>;
/** Either the pool or a transaction: domain functions accept both. */
export type Db = Sql | Tx;

/** The longest wait, in seconds, between a pool's attempts to reconnect to a Postgres that refuses. */
export const RECONNECT_BACKOFF_MAX_S = 2;

/**
 * postgres.js's reconnect delay after `retries` failed connections in a row:
 * its own curve (3^retries / 100 s, jittered by half), capped at 2 s instead of
 * its 20 s. With its own cap, a pool that has been refused for a few seconds
 * tries again only 4-7 s after Postgres is back (after a minute's outage:
 * 10-20 s), and every query of the API, the gateways' charges and the
 * dispatcher's claims wait that long. A few reconnects a second per pool while Postgres is down
 * cost it nothing.
 */
export function reconnectBackoff(retries: number): number {
  return (0.5 + Math.random() / 2) * Math.min(3 ** retries / 100, RECONNECT_BACKOFF_MAX_S);
}

/**
 * postgres.js pool. int8 columns are parsed to JS numbers: every int8 we keep
 * (seconds, ids) stays far below 2^53. numeric (rubles) stays a string so money
 * is never a float. `name` is the connections' application_name (what
 * pg_stat_activity shows an operator).
 */
export function createSql(url: string, opts: { max?: number; name?: string; onnotice?: (n: unknown) => void } = {}): Sql {
  return postgres(url, {
    max: opts.max ?? 10,
    connection: { application_name: opts.name ?? 'lessons' },
    idle_timeout: 30,
    connect_timeout: 10,
    backoff: reconnectBackoff,
    onnotice: opts.onnotice ?? (() => {}),
    types: {
      bigint: {
        to: 20,
        from: [20],
        serialize: (x: number) => String(x),
        parse: (x: string) => Number(x),
      },
    },
  }) as unknown as Sql;
}

/** Postgres unique_violation, optionally on a named constraint or index. */
export function isUniqueViolation(err: unknown, constraint?: string): boolean {
  const e = err as { code?: string; constraint_name?: string };
  return e?.code === '23505' && (!constraint || e.constraint_name === constraint);
}

/** Opens `connections` connections of a pool (one trivial query each), so the first real queries do not wait for them. */
export async function warmPool(sql: Sql, connections: number): Promise<void> {
  await Promise.all(Array.from({ length: connections }, () => sql`SELECT 1`));
}
