/**
 * Time is injected wherever a rule depends on it (token expiry, the 5-minute
 * end, the 6-hour participant.joined window, retry schedules, Moscow days).
 * Tests move a ManualClock instead of sleeping.
 */
export interface Clock {
  now(): Date;
}

export const systemClock: Clock = { now: () => new Date() };

export class ManualClock implements Clock {
  private t: number;
  constructor(start: Date | number = Date.parse('2026-01-15T09:00:00Z')) {
    this.t = typeof start === 'number' ? start : start.getTime();
  }
  now(): Date {
    return new Date(this.t);
  }
  advance(ms: number): void {
    this.t += ms;
  }
  set(at: Date | number): void {
    this.t = typeof at === 'number' ? at : at.getTime();
  }
}
