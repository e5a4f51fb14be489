import { describe, expect, it } from 'vitest';
import { AppError } from '../../src/errors.js';
import { parseDay, resolvePeriod } from '../../src/reports/period.js';

function badRange(input: { from?: string; to?: string }, today = '2026-04-01'): AppError {
  try {
    resolvePeriod(input, today);
  } catch (err) {
    if (err instanceof AppError) return err;
    throw err;
  }
  throw new Error(`no error for ${JSON.stringify(input)}`);
}

describe('report period', () => {
  it('defaults to the last 30 Moscow days with today as the last', () => {
    expect(resolvePeriod({}, '2026-04-01')).toEqual({ from: '2026-03-03', to: '2026-04-01' });
    expect(resolvePeriod({}, '2024-03-01')).toEqual({ from: '2024-02-01', to: '2024-03-01' });
  });

  it('reads from alone as from that day through today', () => {
    expect(resolvePeriod({ from: '2026-01-10' }, '2026-04-01')).toEqual({ from: '2026-01-10', to: '2026-04-01' });
    expect(resolvePeriod({ from: '2026-04-01' }, '2026-04-01')).toEqual({ from: '2026-04-01', to: '2026-04-01' });
  });

  it('accepts a single day and any period of up to one calendar year', () => {
    expect(resolvePeriod({ from: '2026-02-28', to: '2026-02-28' }, '')).toEqual({ from: '2026-02-28', to: '2026-02-28' });
    expect(resolvePeriod({ from: '2025-01-01', to: '2025-12-31' }, '')).toEqual({ from: '2025-01-01', to: '2025-12-31' });
    expect(resolvePeriod({ from: '2024-01-01', to: '2024-12-31' }, '').to).toBe('2024-12-31'); // 366 days of a leap year
    expect(resolvePeriod({ from: '2024-02-29', to: '2025-02-28' }, '').to).toBe('2025-02-28');
  });

  it('refuses a period longer than one year with bad_range', () => {
    for (const [from, to] of [['2025-01-01', '2026-01-01'], ['2024-02-29', '2025-03-01'], ['2023-03-01', '2024-03-01'], ['2020-01-01', '2026-01-01']]) {
      const err = badRange({ from, to });
      expect([err.status, err.code, err.message]).toEqual([400, 'bad_range', 'the period is longer than one year']);
    }
    expect(badRange({ from: '2025-03-31' }, '2026-03-31').message).toBe('the period is longer than one year');
    expect(resolvePeriod({ from: '2025-04-01' }, '2026-03-31').from).toBe('2025-04-01');
  });

  it('refuses from after to, and from after today when to is omitted', () => {
    expect(badRange({ from: '2026-03-02', to: '2026-03-01' }).message).toBe('from is after to');
    expect(badRange({ from: '2026-04-02' }, '2026-04-01').message).toBe('from is after today');
  });

  it('refuses to without from as ambiguous', () => {
    const err = badRange({ to: '2026-03-01' });
    expect(err.code).toBe('bad_range');
    expect(err.message).toMatch(/^to without from is ambiguous/);
  });

  it('refuses anything but a real YYYY-MM-DD date, naming the parameter', () => {
    for (const bad of ['', 'yesterday', '2026-3-1', '2026-03-1', '20260301', '2026-02-29', '2026-02-30', '2026-04-31', '2026-13-01', '2026-00-10', '0000-01-01', '2026-03-01T00:00', ' 2026-03-01', '2026-03-01Z']) {
      expect(badRange({ from: bad, to: '2026-03-10' }).message).toBe('from is not a valid date YYYY-MM-DD');
      expect(badRange({ from: '2026-03-01', to: bad }).message).toBe('to is not a valid date YYYY-MM-DD');
    }
  });

  it('parses leap days and early years by the Gregorian calendar', () => {
    expect(parseDay('2024-02-29')?.toISOString()).toBe('2024-02-29T00:00:00.000Z');
    expect(parseDay('2000-02-29')).not.toBeNull();
    expect(parseDay('1900-02-29')).toBeNull();
    expect(parseDay('0050-06-01')?.getUTCFullYear()).toBe(50);
  });
});
