import { describe, expect, it } from 'vitest';
import { eventually } from '../helpers/wait.js';
import { startReceiver } from './helpers/receiver.js';
import { deliveryOf, startWebhookStack } from './helpers/stack.js';

/**
 * The dispatcher writes the results of many partners' attempts in one statement. A result that
 * Postgres refuses for good (here a trigger stands for bad data: 22003, as an out-of-range value
 * gives) must not hold back the other partners' results: the write is split until the guilty one
 * is alone, and that delivery stays claimed rather than being sent again and again.
 */
describe('one partner cannot hold back the others\' delivery results', () => {
  it('writes every other partner\'s results while one result is refused for good, and sends the refused one once', async () => {
    const stack = await startWebhookStack();
    const rx = await startReceiver();
    const good = await Promise.all([stack.partnerWithWebhook(rx.url), stack.partnerWithWebhook(rx.url)]);
    const bad = await stack.partnerWithWebhook(rx.url);
    await stack.sql.unsafe(`
      CREATE FUNCTION refuse_bad_partner() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF NEW.partner_id = '${bad.partner.id}' THEN RAISE EXCEPTION 'poisoned result' USING ERRCODE = '22003'; END IF;
        RETURN NEW;
      END $$;
      CREATE TRIGGER refuse_bad_partner BEFORE INSERT ON webhook_attempts FOR EACH ROW EXECUTE FUNCTION refuse_bad_partner();`);
    const ids: number[] = [];
    for (let i = 0; i < 10; i++) for (const p of good) ids.push((await stack.record(p.partner.id)).id);
    const poisoned = (await stack.record(bad.partner.id)).id;
    for (let i = 0; i < 10; i++) for (const p of good) ids.push((await stack.record(p.partner.id)).id);
    const d = await stack.dispatcher();

    await eventually(async () => {
      const [r] = await stack.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM webhook_deliveries WHERE state = 'delivered' AND event_id = ANY(${ids})`;
      return r.n === ids.length;
    }, 'every other partner result written', 20_000);
    // the refused result is the only one missing: its delivery stays claimed by the dispatcher that sent it
    const stuck = await deliveryOf(stack.sql, poisoned);
    expect(stuck.state).toBe('pending');
    expect(stuck.claimed_by).toBe(d.id);
    // later events of the other partners are still delivered and recorded, and the refused one is not sent again
    const later = (await stack.record(good[0].partner.id)).id;
    await eventually(async () => (await deliveryOf(stack.sql, later)).state === 'delivered', 'a later event delivered');
    const sent = rx.requests.map((r) => Number(r.headers['x-whiteboard-delivery']));
    expect(sent.filter((id) => id === poisoned)).toHaveLength(1);
    expect(new Set(sent)).toEqual(new Set([...ids, poisoned, later]));
    await rx.close();
  });
});
