import type { Db, Sql } from '../db/index.js';

/**
 * The delivery queue in Postgres (migrations/003_webhooks.sql): claiming due
 * deliveries and writing attempt results, both in batches so one dispatcher
 * keeps up with thousands of deliveries a second.
 */

import { DISPATCHER_LOCK_CLASS } from '../db/locks.js';

export interface ClaimedDelivery {
  event_id: number;
  partner_id: string;
  round: number;
  /** attempts already made in this round; this attempt is number attempts + 1 */
  attempts: number;
  type: string;
  data: unknown;
  created_at: Date;
  url: string;
  /** sealed (SecretBox) */
  secret: string;
}

export interface ClaimRequest {
  dispatcher: number;
  now: Date;
  /** at most this many rows */
  limit: number;
  /** at most this many rows of a partner not listed in `busy` */
  perPartner: number;
  /** partners with sends in flight here, and how many more each may take (0 = skip) */
  busy: { partner_id: string; free: number }[];
  /** a claim older than this (database time) is taken over even from a live dispatcher */
  leaseMs: number;
  /**
   * a claim of a dispatcher whose lock is gone is taken over once it is older
   * than this: the longest an attempt can last (WEBHOOK_TIMEOUT_MS), so the
   * attempt it was making has ended even if that dispatcher still lives
   */
  takeoverMs: number;
  /**
   * event ids this dispatcher has claimed and not yet recorded (attempts in
   * flight, results not written yet). A row claimed under its own number that is
   * not among them is one whose claim committed while the answer was lost with
   * the connection: it is claimed again, or it would wait for the lease.
   */
  held: number[];
}

/**
 * Claims due deliveries with FOR UPDATE SKIP LOCKED, so concurrent dispatchers
 * never claim the same row (a row a concurrent claim locked is skipped, one it
 * already claimed fails the re-check). A row still claimed by another dispatcher is taken
 * over only when that dispatcher's advisory lock is gone and its attempt has
 * surely ended (it died, or lost its connection: the attempt is retried with the
 * same attempt number), or its lease ran out.
 * A dispatcher whose own lock is not held claims nothing, and never takes back
 * rows claimed under its own number: those are its attempts in flight. Losing
 * the lock's connection therefore cannot make it re-send what it is sending.
 * Rows are scanned in due order; partners at their limit are skipped in the scan
 * so one partner's backlog does not hide the others' events.
 */
export async function claimDue(sql: Db, req: ClaimRequest): Promise<ClaimedDelivery[]> {
  const busy = sql.json(req.busy as never);
  // Repeated on the locked version of each row (a concurrent claim may have changed it).
  const claimable = sql`(d.claimed_by IS NULL
        OR (d.claimed_by = ${req.dispatcher} AND d.event_id <> ALL ((SELECT ids FROM held)::bigint[]))
        OR (d.claimed_by <> ${req.dispatcher}
            AND ((d.claimed_by <> ALL ((SELECT ids FROM live)::integer[])
                  AND d.claimed_at < clock_timestamp() - make_interval(secs => ${req.takeoverMs / 1000}))
                 OR d.claimed_at < clock_timestamp() - make_interval(secs => ${req.leaseMs / 1000}))))`;
  return sql<ClaimedDelivery[]>`
    WITH live AS MATERIALIZED (
      SELECT coalesce(array_agg(objid::bigint::integer), '{}') AS ids FROM pg_locks
      WHERE locktype = 'advisory' AND classid = ${DISPATCHER_LOCK_CLASS}::bigint::oid AND objsubid = 2 AND granted
        AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
    ),
    held AS MATERIALIZED (
      SELECT coalesce(array_agg(x::bigint), '{}') AS ids FROM jsonb_array_elements_text(${sql.json(req.held as never)}::jsonb) AS x
    ),
    busy AS MATERIALIZED (
      SELECT * FROM jsonb_to_recordset(${busy}::jsonb) AS b(partner_id text, free integer)
    ),
    cand AS (
      SELECT d.event_id, d.partner_id, d.next_attempt_at FROM webhook_deliveries d
      WHERE d.state = 'pending' AND d.next_attempt_at <= ${req.now}
        AND d.partner_id NOT IN (SELECT partner_id FROM busy WHERE free <= 0)
        AND ${req.dispatcher} = ANY ((SELECT ids FROM live)::integer[])
        AND ${claimable}
      ORDER BY d.next_attempt_at, d.event_id
      LIMIT ${req.limit * 4}
    ),
    picked AS (
      SELECT r.event_id FROM (
        SELECT c.*, row_number() OVER (PARTITION BY c.partner_id ORDER BY c.next_attempt_at, c.event_id) AS rn FROM cand c
      ) r LEFT JOIN busy b ON b.partner_id = r.partner_id
      WHERE r.rn <= coalesce(b.free, ${req.perPartner})
      ORDER BY r.next_attempt_at, r.event_id
      LIMIT ${req.limit}
    ),
    -- Only the picked rows are locked. The claim conditions are repeated here:
    -- a row another dispatcher claimed meanwhile is re-checked on its new version.
    locked AS (
      SELECT d.event_id FROM webhook_deliveries d
      WHERE d.event_id IN (SELECT event_id FROM picked)
        AND d.state = 'pending' AND d.next_attempt_at <= ${req.now}
        AND ${claimable}
      FOR UPDATE OF d SKIP LOCKED
    )
    UPDATE webhook_deliveries d SET claimed_by = ${req.dispatcher}, claimed_at = clock_timestamp()
    FROM locked l, events e, webhooks w
    WHERE d.event_id = l.event_id AND e.id = d.event_id AND w.partner_id = d.partner_id
    RETURNING d.event_id, d.partner_id, d.round, d.attempts, e.type, e.data, e.created_at, w.url, w.secret`;
}

export interface AttemptResult {
  event_id: number;
  partner_id: string;
  round: number;
  attempt: number;
  url: string;
  address: string | null;
  attempted_at: string;
  duration_ms: number;
  status_code: number | null;
  error: string | null;
  delivered: boolean;
  /** the row's state after this attempt (same round only) */
  state: 'pending' | 'delivered' | 'undelivered';
  next_attempt_at: string | null;
}

/**
 * Logs every attempt (also one whose claim was taken over meanwhile: it reached
 * the receiver or tried to) and releases the claim if it is still ours. The
 * row's state changes only when it is still in the round the attempt was made
 * in (a redeliver or DELETE /webhook in the meantime started a new round), and
 * only if the claim is still ours or the attempt delivered: a delivery that
 * succeeded is final, so a late result written after a takeover stops the
 * other dispatcher's retries, and no later failure reopens a delivered row.
 */
export async function recordResults(sql: Sql, dispatcher: number, results: AttemptResult[]): Promise<void> {
  if (results.length === 0) return;
  await sql`
    WITH r AS (
      SELECT * FROM jsonb_to_recordset(${sql.json(results as never)}::jsonb) AS r(
        event_id bigint, partner_id text, round integer, attempt integer, url text, address text,
        attempted_at timestamptz, duration_ms integer, status_code integer, error text, delivered boolean,
        state text, next_attempt_at timestamptz)
    ),
    logged AS (
      INSERT INTO webhook_attempts (event_id, partner_id, round, attempt, url, address, attempted_at, duration_ms,
                                    status_code, error, delivered, dispatcher)
      SELECT event_id, partner_id, round, attempt, url, address, attempted_at, duration_ms, status_code, error, delivered, ${dispatcher}
      FROM r
      -- a write retried after its commit's answer was lost logs nothing twice
      WHERE NOT EXISTS (SELECT 1 FROM webhook_attempts a WHERE a.event_id = r.event_id AND a.dispatcher = ${dispatcher}
                          AND a.round = r.round AND a.attempt = r.attempt AND a.attempted_at = r.attempted_at)
      ORDER BY attempted_at, event_id
    )
    UPDATE webhook_deliveries d SET
      claimed_by = CASE WHEN d.claimed_by = ${dispatcher} THEN NULL ELSE d.claimed_by END,
      claimed_at = CASE WHEN d.claimed_by = ${dispatcher} THEN NULL ELSE d.claimed_at END,
      state = CASE WHEN d.round = r.round AND d.state <> 'delivered' THEN r.state ELSE d.state END,
      attempts = CASE WHEN d.round = r.round AND d.state <> 'delivered' THEN r.attempt ELSE d.attempts END,
      next_attempt_at = CASE WHEN d.round = r.round AND d.state <> 'delivered' THEN r.next_attempt_at ELSE d.next_attempt_at END,
      last_attempt_at = r.attempted_at,
      delivered_at = CASE WHEN d.round = r.round AND d.state <> 'delivered' AND r.delivered THEN r.attempted_at ELSE d.delivered_at END
    FROM r
    WHERE d.event_id = r.event_id AND (d.claimed_by = ${dispatcher} OR (r.delivered AND d.round = r.round))`;
}

/** The state after attempt number `attempt` failed or succeeded (1 + schedule.length attempts in all). */
export function nextState(
  delivered: boolean,
  attempt: number,
  finishedAt: Date,
  scheduleSeconds: readonly number[],
): { state: AttemptResult['state']; next_attempt_at: string | null } {
  if (delivered) return { state: 'delivered', next_attempt_at: null };
  const delay = scheduleSeconds[attempt - 1];
  if (delay === undefined) return { state: 'undelivered', next_attempt_at: null };
  return { state: 'pending', next_attempt_at: new Date(finishedAt.getTime() + delay * 1000).toISOString() };
}
