import { describe, expect, it } from 'vitest';
import { runAdmin } from '../../src/cli/admin.js';
import { recordMeteredTime } from '../../src/metering/charge.js';
import { ensureSessionStarted } from '../../src/metering/sessions.js';
import { startTestApi } from '../helpers/api.js';
import { partnerFactory } from '../helpers/factories.js';
import { lessonFactory } from '../helpers/lessons.js';

const api = await startTestApi();

describe('GET /balance', () => {
  it('reports every field of the spec from the ledger', async () => {
    const p = await partnerFactory(api.deps.sql, { minutes: 0, boardRatePercent: 25 });
    let res = await api.request('GET', '/balance', { key: p.apiKey });
    expect(res.body).toEqual({ balance_seconds: 0, balance_minutes: 0, plan: 'full', board_rate_percent: 25 });
    await runAdmin(api.deps.sql, ['topup', p.partner.id, '--minutes', '90', '--rub', '900.50']);
    await runAdmin(api.deps.sql, ['topup', p.partner.id, '--minutes', '10']);
    res = await api.request('GET', '/balance', { key: p.apiKey });
    expect(res.body).toEqual({ balance_seconds: 6000, balance_minutes: 100, plan: 'full', board_rate_percent: 25 });
    const topups = await api.deps.sql`SELECT seconds, rub::text AS rub FROM topups WHERE partner_id = ${p.partner.id} ORDER BY id`;
    expect(topups.map((t) => ({ ...t }))).toEqual([{ seconds: 5400, rub: '900.50' }, { seconds: 600, rub: '0.00' }]);
  });

  it("names the board-only plan 'board_only'", async () => {
    const p = await partnerFactory(api.deps.sql, { plan: 'board_only' });
    expect((await api.request('GET', '/balance', { key: p.apiKey })).body.plan).toBe('board_only');
  });

  it('reflects charges and may go negative, with minutes truncated toward zero', async () => {
    const p = await partnerFactory(api.deps.sql, { minutes: 1 });
    const lesson = await lessonFactory(api.deps.sql, p.partner);
    const t0 = new Date();
    const { session } = await ensureSessionStarted(api.deps.sql, { lessonId: lesson.id, at: t0, people: 2 });
    await recordMeteredTime(api.deps.sql, { sessionId: session.id, cumulativeSeconds: 119, at: new Date(t0.getTime() + 119_000) });
    const res = await api.request('GET', '/balance', { key: p.apiKey });
    expect(res.body).toMatchObject({ balance_seconds: -59, balance_minutes: 0 });
    await recordMeteredTime(api.deps.sql, { sessionId: session.id, cumulativeSeconds: 121, at: new Date(t0.getTime() + 121_000) });
    expect((await api.request('GET', '/balance', { key: p.apiKey })).body).toMatchObject({ balance_seconds: -61, balance_minutes: -1 });
  });
});
