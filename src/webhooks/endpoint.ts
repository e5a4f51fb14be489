import type { Deps } from '../deps.js';
import { SPEC_EVENT_TYPES } from '../events/outbox.js';
import { Errors } from '../errors.js';
import { AddressRejected, checkWebhookUrl } from './address.js';
import { webhookRuntime } from './runtime.js';
import { decodeSigningSecrets, encodeSigningSecrets, generateWebhookSecret, type SigningSecrets } from './secrets.js';

/** PUT /webhook: the address as the partner gave it, and the new secret (returned only here). */
export interface ConfiguredWebhook {
  url: string;
  secret: string;
  enabled_events: string[];
}

/**
 * Sets (or replaces) the partner's webhook with a new secret. The address is
 * checked by every rule first, DNS included; a refused address changes nothing.
 * The new URL and secret apply to every attempt claimed after this commits.
 *
 * `rotate`: the secret in use until now keeps signing beside the new one for
 * `overlapMs` (a receiver may verify with either while it switches). Without it
 * the old secret stops at once. A rotation during a rotation keeps only the
 * secret that was current (the older one stops).
 */
export async function setWebhook(
  deps: Deps,
  partnerId: string,
  url: string,
  opts: { rotate?: { overlapMs: number }; enabledEvents?: readonly string[] } = {},
): Promise<ConfiguredWebhook> {
  const rt = webhookRuntime(deps);
  try {
    await checkWebhookUrl(url, rt.policy);
  } catch (err) {
    if (err instanceof AddressRejected) throw Errors.badUrl(`The webhook address is not acceptable: ${err.message}`);
    throw err;
  }
  const secret = generateWebhookSecret();
  const at = deps.clock.now();
  const enabled = await deps.sql.begin(async (tx) => {
    let signing: SigningSecrets = { current: secret };
    if (opts.rotate) {
      const [row] = await tx<{ secret: string }[]>`SELECT secret FROM webhooks WHERE partner_id = ${partnerId} FOR UPDATE`;
      if (row) {
        const previous = decodeSigningSecrets(rt.secrets.open(row.secret, partnerId)).current;
        signing = { current: secret, previous: { secret: previous, until: new Date(at.getTime() + opts.rotate.overlapMs) } };
      }
    }
    // enabled_events absent: the column's default for a new webhook (the spec's types), the current list for an existing one
    const list = opts.enabledEvents ? [...new Set(opts.enabledEvents)] : [...SPEC_EVENT_TYPES];
    const [row] = await tx<{ enabled_events: string[] }[]>`
      INSERT INTO webhooks (partner_id, url, secret, created_at, updated_at, enabled_events)
      VALUES (${partnerId}, ${url}, ${rt.secrets.seal(encodeSigningSecrets(signing), partnerId)}, ${at}, ${at}, ${list}::text[])
      ON CONFLICT (partner_id) DO UPDATE SET url = EXCLUDED.url, secret = EXCLUDED.secret, updated_at = EXCLUDED.updated_at
        ${opts.enabledEvents ? tx`, enabled_events = EXCLUDED.enabled_events` : tx``}
      RETURNING enabled_events`;
    return row.enabled_events;
  });
  return { url, secret, enabled_events: enabled };
}

/** GET /webhook: what is configured, never a secret. */
export interface WebhookState {
  url: string;
  created_at: Date;
  updated_at: Date;
  /** while the previous secret still signs beside the current one: until when */
  previous_secret_expires_at: Date | null;
  enabled_events: string[];
}

export async function getWebhook(deps: Deps, partnerId: string): Promise<WebhookState | undefined> {
  const [row] = await deps.sql<{ url: string; secret: string; created_at: Date; updated_at: Date; enabled_events: string[] }[]>`
    SELECT url, secret, created_at, updated_at, enabled_events FROM webhooks WHERE partner_id = ${partnerId}`;
  if (!row) return undefined;
  let previous: SigningSecrets['previous'];
  try {
    previous = decodeSigningSecrets(webhookRuntime(deps).secrets.open(row.secret, partnerId)).previous;
  } catch {
    // sealed under a key no longer configured: nothing signs with it (its attempts fail, logged by the dispatcher)
    previous = undefined;
  }
  const until = previous && previous.until.getTime() > deps.clock.now().getTime() ? previous.until : null;
  return { url: row.url, created_at: row.created_at, updated_at: row.updated_at, previous_secret_expires_at: until, enabled_events: row.enabled_events };
}

/**
 * DELETE /webhook: removes the endpoint and cancels every pending delivery
 * (a partner that removes its webhook asked us to stop sending). Cancelled
 * events stay readable in GET /events and can be redelivered after a new PUT.
 * Idempotent: 204 also when none was set.
 */
export async function removeWebhook(deps: Deps, partnerId: string): Promise<void> {
  await deps.sql.begin(async (tx) => {
    // Waits for event transactions holding the webhook row (FOR KEY SHARE in the
    // trigger), so the UPDATE below also sees the deliveries they scheduled.
    await tx`DELETE FROM webhooks WHERE partner_id = ${partnerId}`;
    await tx`
      UPDATE webhook_deliveries SET state = 'cancelled', round = round + 1, next_attempt_at = NULL
      WHERE partner_id = ${partnerId} AND state = 'pending'`;
  });
}
