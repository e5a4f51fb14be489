import { beforeAll, describe, expect, it } from 'vitest';
import { startTestApi } from '../helpers/api.js';
import { ManualClock } from '../helpers/deps.js';
import { balanceOf, partnerFactory, type PartnerFixture } from '../helpers/factories.js';
import { lessonFactory } from '../helpers/lessons.js';
import { msk, playTimeline, type SessionPlan, type TopUpPlan } from './driver.js';

/**
 * The reports reconcile with the balance to the second. A seeded random
 * timeline of full and board-only sessions (many crossing Moscow midnight, one
 * still running, top-ups in between) is charged through the production path;
 * the balance is read at every Moscow midnight, and every period of the eight
 * days is checked against it and against an independent computation.
 */
const RATE = 37; // an odd board rate, so the floor of the fractions matters
const DAYS = Array.from({ length: 8 }, (_, i) => `2026-02-0${i + 1}`);
const midnight = (i: number) => new Date(msk(`${DAYS[0]}T00:00:00`).getTime() + i * 86_400_000);
const dayIndexOf = (t: number) => Math.floor((t - midnight(0).getTime()) / 86_400_000);

const clock = new ManualClock(msk('2026-02-09T12:00:00'));
const api = await startTestApi({ clock });
const { sql } = api.deps;

function mulberry32(seed: number) {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

let p: PartnerFixture;
const lessons: { id: string; mode: 'full' | 'board_only' }[] = [];
const plans: SessionPlan[] = [];
const topups: TopUpPlan[] = [];
/** balance at midnight i (start of DAYS[i]); index 8 is the end of the last day */
const balanceAt: number[] = [];
const charged = (mode: string, seconds: number) => (mode === 'full' ? seconds : Math.floor((seconds * RATE) / 100));

beforeAll(async () => {
  p = await partnerFactory(sql, { boardRatePercent: RATE, minutes: 0 });
  for (const mode of ['full', 'full', 'full', 'board_only', 'board_only', 'board_only'] as const) {
    lessons.push({ id: (await lessonFactory(sql, p.partner, { mode })).id, mode });
  }
  const rnd = mulberry32(20260201);
  const end = midnight(8).getTime() - 3 * 3600_000;
  lessons.forEach((lesson, li) => {
    let t = midnight(0).getTime() + Math.floor(rnd() * 20 * 3600) * 1000;
    while (t < end) {
      const seconds = 30 + Math.floor(rnd() * 7200);
      plans.push({ lessonId: lesson.id, start: new Date(t), seconds, people: [2, 2 + Math.floor(rnd() * 6)] });
      t += (seconds + 3600 + Math.floor(rnd() * 30 * 3600)) * 1000;
    }
    if (li === 0) plans[plans.length - 1].running = true;
  });
  for (let i = 0; i < 3; i++) {
    topups.push({ at: new Date(midnight(i * 3).getTime() + Math.floor(rnd() * 86_400) * 1000), minutes: 100 + i * 50, rub: `${900 + i * 111}.5${i}` });
  }
  await playTimeline(sql, p.partner.id, {
    sessions: plans,
    topups,
    tickSeconds: 173,
    checkpoints: Array.from({ length: 9 }, (_, i) => midnight(i)),
    onCheckpoint: async (at) => {
      balanceAt[dayIndexOf(at.getTime())] = await balanceOf(sql, p.partner.id);
    },
  });
}, 120_000);

const get = async (path: string) => {
  const res = await api.request('GET', path, { key: p.apiKey });
  expect(res.status).toBe(200);
  return res.body;
};

/** Independent expectation: each plan split at Moscow midnight, the board fraction floored cumulatively. */
function expectedUsage(fromIdx: number, toIdx: number) {
  const items = new Map<string, { lesson_id: string; mode: string; day: string; seconds: number; charged_seconds: number }>();
  for (const plan of plans) {
    const mode = lessons.find((l) => l.id === plan.lessonId)!.mode;
    let cursor = plan.start.getTime();
    let done = 0;
    while (done < plan.seconds) {
      const d = dayIndexOf(cursor);
      const inDay = Math.min(plan.seconds - done, (midnight(d + 1).getTime() - cursor) / 1000);
      if (d >= fromIdx && d <= toIdx) {
        const key = `${DAYS[d]}|${plan.lessonId}`;
        const item = items.get(key) ?? { lesson_id: plan.lessonId, mode, day: DAYS[d], seconds: 0, charged_seconds: 0 };
        item.seconds += inDay;
        item.charged_seconds += charged(mode, done + inDay) - charged(mode, done);
        items.set(key, item);
      }
      done += inDay;
      cursor += inDay * 1000;
    }
  }
  return [...items.entries()].sort(([a], [b]) => (a < b ? -1 : 1)).map(([, v]) => v);
}

describe('reconciliation', () => {
  it('has a timeline that exercises midnight crossings, a running session and top-ups', () => {
    const crossing = plans.filter((s) => dayIndexOf(s.start.getTime()) !== dayIndexOf(s.start.getTime() + s.seconds * 1000 - 1));
    expect(plans.length).toBeGreaterThan(15);
    expect(crossing.length).toBeGreaterThan(2);
    expect(plans.filter((s) => s.running)).toHaveLength(1);
    expect(balanceAt).toHaveLength(9);
  });

  it('matches usage, item by item, to the time metered each Moscow day', async () => {
    const body = await get(`/usage?from=${DAYS[0]}&to=${DAYS[7]}`);
    expect(body.items.map(({ external_id, ...rest }: any) => rest)).toEqual(expectedUsage(0, 7));
  });

  it('for every period: usage charged_seconds is the balance decrease over it, top-ups aside', async () => {
    for (let i = 0; i < DAYS.length; i++) {
      for (let j = i; j < DAYS.length; j++) {
        const body = await get(`/usage?from=${DAYS[i]}&to=${DAYS[j]}`);
        const toppedUp = topups
          .filter((t) => t.at > midnight(i) && t.at <= midnight(j + 1))
          .reduce((s, t) => s + t.minutes * 60, 0);
        expect([DAYS[i], DAYS[j], body.total_charged_seconds]).toEqual([DAYS[i], DAYS[j], balanceAt[i] - balanceAt[j + 1] + toppedUp]);
        expect(body.total_charged_seconds).toBe(body.items.reduce((s: number, x: any) => s + x.charged_seconds, 0));
        expect(body.total_seconds).toBe(body.items.reduce((s: number, x: any) => s + x.seconds, 0));
      }
    }
  });

  it('for every period: calls hold the sessions started in it, and equal usage and the balance decrease when no session crosses its edges', async () => {
    let reconciledPeriods = 0;
    for (let i = 0; i < DAYS.length; i++) {
      for (let j = i; j < DAYS.length; j++) {
        const inPeriod = plans.filter((s) => dayIndexOf(s.start.getTime()) >= i && dayIndexOf(s.start.getTime()) <= j);
        const mode = (s: SessionPlan) => lessons.find((l) => l.id === s.lessonId)!.mode;
        const body = await get(`/calls?from=${DAYS[i]}&to=${DAYS[j]}&limit=1000`);
        expect(body.total).toMatchObject({
          count: inPeriod.length,
          seconds: inPeriod.reduce((s, x) => s + x.seconds, 0),
          charged_seconds: inPeriod.reduce((s, x) => s + charged(mode(x), x.seconds), 0),
        });
        expect(body.total.charged_seconds).toBe(body.items.reduce((s: number, x: any) => s + x.charged_seconds, 0));
        const crossesEdge = plans.some((s) => {
          const a = s.start.getTime();
          const b = a + s.seconds * 1000;
          return [midnight(i), midnight(j + 1)].some((m) => a < m.getTime() && b > m.getTime());
        });
        if (crossesEdge) continue;
        const usage = await get(`/usage?from=${DAYS[i]}&to=${DAYS[j]}`);
        const toppedUp = topups.filter((t) => t.at > midnight(i) && t.at <= midnight(j + 1)).reduce((s, t) => s + t.minutes * 60, 0);
        expect(body.total.charged_seconds).toBe(usage.total_charged_seconds);
        expect(body.total.charged_seconds).toBe(balanceAt[i] - balanceAt[j + 1] + toppedUp);
        reconciledPeriods++;
      }
    }
    expect(reconciledPeriods).toBeGreaterThan(3);
  });

  it("sums a lesson's usage seconds over all time to its billed_seconds", async () => {
    const body = await get(`/usage?from=${DAYS[0]}&to=2026-02-09`);
    for (const lesson of lessons) {
      const billed = (await get(`/lessons/${lesson.id}`)).billed_seconds;
      const sum = body.items.filter((x: any) => x.lesson_id === lesson.id).reduce((s: number, x: any) => s + x.seconds, 0);
      expect([lesson.id, sum]).toEqual([lesson.id, billed]);
      expect(sum).toBeGreaterThan(0);
    }
  });

  it('adds the pages of calls up to the total, cost included', async () => {
    const all = await get(`/calls?from=${DAYS[0]}&to=${DAYS[7]}&limit=1000`);
    let kopecks = 0;
    let count = 0;
    for (let offset = 0; offset < all.total.count; offset += 4) {
      const page = await get(`/calls?from=${DAYS[0]}&to=${DAYS[7]}&limit=4&offset=${offset}`);
      expect(page.total).toEqual(all.total);
      kopecks += page.items.reduce((s: number, x: any) => s + Math.round(x.cost_rub * 100), 0);
      count += page.items.length;
    }
    expect(count).toBe(plans.length);
    expect(kopecks).toBe(Math.round(all.total.cost_rub * 100));
    expect(all.total.cost_rub).toBeGreaterThan(0);
  });
});
