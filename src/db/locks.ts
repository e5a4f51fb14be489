/**
 * Postgres advisory lock keys, numbered once. Every key of ours starts with
 * 72430xx, so an operator can tell them apart in pg_locks (`classid` for the
 * two-key form, `objid` for the one-key form). 7243003 is not used.
 */

/** Migrations (src/db/migrate.ts): one transaction lock per migration, so processes starting at once apply each exactly once. */
export const MIGRATION_LOCK = 7243001;

/** Outbox (src/events/outbox.ts): first key of the per-partner transaction lock (the second is hashtext(partner id)) that commits a partner's events in id order. */
export const OUTBOX_PARTNER_LOCK_CLASS = 7243002;

/** Webhook dispatchers (src/webhooks/dispatcher.ts): first key of each dispatcher's liveness session lock; the second is its number (migrations/003_webhooks.sql). */
export const DISPATCHER_LOCK_CLASS = 7243004;
