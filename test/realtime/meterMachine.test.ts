import { describe, expect, it } from 'vitest';
import { METER_FIELDS } from '../../realtime/presence/lua.js';
import { meteredSeconds, onCount, parseMeterValues, type MeterState } from '../../realtime/presence/MeterMachine.js';
import { METERED_PEOPLE } from '../../src/metering/rules.js';

/** The meter's states as read from the Redis hash, and the rules stated in src/metering/rules.ts. */
const hash = (f: Partial<Record<(typeof METER_FIELDS)[number], string>>) => METER_FIELDS.map((k) => f[k] ?? '');

describe('the meter hash is read into exactly one state', () => {
  it('reads no session and no pending start as idle, a pending start as starting, a session as running or paused', () => {
    expect(parseMeterValues(hash({ seq: '3' }))).toMatchObject({ state: 'idle', seq: 3, pendingEnd: null });
    expect(parseMeterValues(hash({ start_at: '10', start_claim: '11', since: '10', acc: '0' }))).toMatchObject({ state: 'starting', startAt: 10, startClaim: 11, since: 10 });
    expect(parseMeterValues(hash({ start_at: '10', acc: '500', paused_at: '20' }))).toMatchObject({ state: 'starting', since: null, accMs: 500, pausedAt: 20 });
    expect(parseMeterValues(hash({ sid: '7', acc: '1000', since: '50', paused_at: '40' }))).toEqual(expect.objectContaining({ state: 'running', sessionId: 7, accMs: 1000, since: 50 }));
    expect(parseMeterValues(hash({ sid: '7', acc: '1000', paused_at: '40', empty: '45' }))).toMatchObject({ state: 'paused', pausedAt: 40, emptySince: 45 });
  });

  it('reads a pending end beside any state', () => {
    const m = parseMeterValues(hash({ start_at: '10', since: '10', end_sid: '6', end_cum: '61', end_charge_at: '90', end_at: '95' }));
    expect(m).toMatchObject({ state: 'starting', pendingEnd: { sessionId: 6, seconds: 61, chargeAt: 90, endAt: 95 } });
  });
});

describe('the two-person rule (METERED_PEOPLE)', () => {
  const idle: MeterState = { state: 'idle', seq: 0, emptySince: null, peopleMax: 0, pendingEnd: null, flushAt: null, seededAt: null, goneAt: null };

  it('meters from the moment the METERED_PEOPLE-th distinct person is present, and not before', () => {
    expect(METERED_PEOPLE).toBe(2);
    let m = idle;
    for (let n = 0; n < METERED_PEOPLE - 1; n++) {
      const r = onCount(m, n, n + 1, 1000, 1000, 300_000);
      expect(r.fx).not.toContain('start');
      m = r.m;
    }
    const r = onCount(m, METERED_PEOPLE - 1, METERED_PEOPLE, 2000, 2000, 300_000);
    expect(r.fx).toEqual(['start']);
    expect(meteredSeconds(r.m, 5500)).toBe(3);
    const below = onCount(r.m, METERED_PEOPLE, METERED_PEOPLE - 1, 6000, 6000, 300_000);
    expect(below.fx).toEqual(['pause']);
    expect(meteredSeconds(below.m, 60_000)).toBe(4);
  });
});
