import { createHmac } from 'node:crypto';

/** Fixed product token with the version of the delivery format (signature scheme v1). */
export const USER_AGENT = 'Whiteboard-Webhooks/1.0';

export interface DeliverableEvent {
  id: number;
  type: string;
  created_at: Date;
  data: unknown;
}

/** The request body of the spec: `{id, type, created_at, data}`, byte-identical on every attempt. */
export function eventBody(e: DeliverableEvent): string {
  return JSON.stringify({ id: e.id, type: e.type, created_at: e.created_at.toISOString(), data: e.data });
}

/**
 * `t=<unix seconds>,v1=<lowercase hex HMAC-SHA256("<t>." + raw body)>`, keyed with
 * the secret string as given to the partner (`whsec_...`, its UTF-8 bytes).
 * Made anew at every attempt with that attempt's time.
 */
export function signatureHeader(secret: string, unixSeconds: number, rawBody: string | Buffer): string {
  const mac = createHmac('sha256', secret).update(`${unixSeconds}.`, 'utf8').update(rawBody).digest('hex');
  return `t=${unixSeconds},v1=${mac}`;
}

/** Every header of a delivery. */
export function deliveryHeaders(e: { id: number; type: string }, signature: string): Record<string, string> {
  return {
    'content-type': 'application/json',
    'user-agent': USER_AGENT,
    'x-whiteboard-event': e.type,
    'x-whiteboard-delivery': String(e.id),
    'x-whiteboard-signature': signature,
  };
}
