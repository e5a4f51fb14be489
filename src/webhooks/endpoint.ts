import type { Deps } from '../deps.js';
import { Errors } from '../errors.js';
import { AddressRejected, checkWebhookUrl } from './address.js';
import { webhookRuntime } from './runtime.js';
import { generateWebhookSecret } from './secrets.js';

/** PUT /webhook: the address as the partner gave it, and the new secret (returned only here). */
export interface ConfiguredWebhook {
  url: string;
  secret: string;
}

/**
 * Sets (or replaces) the partner's webhook with a new secret. The address is
 * checked by every rule first, DNS included; a refused address changes nothing.
 * The new URL and secret apply to every attempt claimed after this commits.
 */
export async function setWebhook(deps: Deps, partnerId: string, url: string): Promise<ConfiguredWebhook> {
  const rt = webhookRuntime(deps);
  try {
    await checkWebhookUrl(url, rt.policy);
  } catch (err) {
    if (err instanceof AddressRejected) throw Errors.badUrl(`The webhook address is not acceptable: ${err.message}`);
    throw err;
  }
  const secret = generateWebhookSecret();
  const at = deps.clock.now();
  await deps.sql`
    INSERT INTO webhooks (partner_id, url, secret, created_at, updated_at)
    VALUES (${partnerId}, ${url}, ${rt.secrets.seal(secret, partnerId)}, ${at}, ${at})
    ON CONFLICT (partner_id) DO UPDATE SET url = EXCLUDED.url, secret = EXCLUDED.secret, updated_at = EXCLUDED.updated_at`;
  return { url, secret };
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
