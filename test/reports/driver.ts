import type { Sql } from '../../src/db/index.js';
import { topUp } from '../../src/domain/ledger.js';
import { recordMeteredTime } from '../../src/metering/charge.js';
import { endSession, ensureSessionStarted } from '../../src/metering/sessions.js';

/**
 * Drives the production charging path (src/metering) the way the gateway does:
 * a session starts, is charged periodically with its cumulative metered time,
 * and ends. Everything is replayed in one timeline in time order, so balance
 * snapshots taken at checkpoints are the real balance at those instants.
 */
export interface SessionPlan {
  lessonId: string;
  start: Date;
  /** metered seconds, continuous from start */
  seconds: number;
  /** people at start, and the peaks reported by later charges */
  people?: number[];
  /** still going at the end of the timeline: charged up to start + seconds, not ended */
  running?: boolean;
}

export interface TopUpPlan {
  at: Date;
  minutes: number;
  rub: string;
}

type Step =
  | { at: number; order: 0; kind: 'start'; plan: SessionPlan; idx: number }
  | { at: number; order: 1; kind: 'tick'; idx: number; cumulative: number; people?: number }
  | { at: number; order: 2; kind: 'end'; idx: number }
  | { at: number; order: 3; kind: 'topup'; topup: TopUpPlan }
  | { at: number; order: 4; kind: 'checkpoint' };

export async function playTimeline(
  sql: Sql,
  partnerId: string,
  input: {
    sessions: SessionPlan[];
    topups?: TopUpPlan[];
    /** charge cadence, as the gateway's periodic charge */
    tickSeconds?: number;
    /** instants at which every running session is charged and `onCheckpoint` runs */
    checkpoints?: Date[];
    onCheckpoint?: (at: Date) => Promise<void>;
  },
): Promise<{ sessionIds: number[] }> {
  const tick = input.tickSeconds ?? 5;
  const checkpoints = (input.checkpoints ?? []).map((d) => d.getTime());
  const steps: Step[] = [];
  input.sessions.forEach((plan, idx) => {
    const t0 = plan.start.getTime();
    const t1 = t0 + plan.seconds * 1000;
    steps.push({ at: t0, order: 0, kind: 'start', plan, idx });
    const ticks = new Set<number>();
    for (let s = tick; s < plan.seconds; s += tick) ticks.add(t0 + s * 1000);
    for (const c of checkpoints) if (c > t0 && c < t1) ticks.add(c);
    ticks.add(t1);
    const peaks = plan.people ?? [2];
    [...ticks].sort((a, b) => a - b).forEach((at, i) => {
      steps.push({ at, order: 1, kind: 'tick', idx, cumulative: (at - t0) / 1000, people: peaks[i + 1] });
    });
    if (!plan.running) steps.push({ at: t1, order: 2, kind: 'end', idx });
  });
  for (const topup of input.topups ?? []) steps.push({ at: topup.at.getTime(), order: 3, kind: 'topup', topup });
  for (const c of checkpoints) steps.push({ at: c, order: 4, kind: 'checkpoint' });
  steps.sort((a, b) => a.at - b.at || a.order - b.order);

  const ids: number[] = [];
  for (const step of steps) {
    const at = new Date(step.at);
    switch (step.kind) {
      case 'start': {
        const { session, started } = await ensureSessionStarted(sql, { lessonId: step.plan.lessonId, at, people: step.plan.people?.[0] ?? 2 });
        if (!started) throw new Error(`plan ${step.idx}: lesson ${step.plan.lessonId} already has a running session`);
        ids[step.idx] = session.id;
        break;
      }
      case 'tick':
        await recordMeteredTime(sql, { sessionId: ids[step.idx], cumulativeSeconds: step.cumulative, at, people: step.people });
        break;
      case 'end':
        await endSession(sql, { sessionId: ids[step.idx], endedAt: at, at: new Date(step.at + 300_000) });
        break;
      case 'topup':
        await topUp(sql, { partnerId, minutes: step.topup.minutes, rub: step.topup.rub, at });
        break;
      case 'checkpoint':
        await input.onCheckpoint?.(at);
        break;
    }
  }
  return { sessionIds: ids };
}

/** An instant given as Moscow wall-clock time (UTC+3 all year since 2014). */
export function msk(local: string): Date {
  return new Date(`${local}+03:00`);
}
