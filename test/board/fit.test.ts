import { describe, expect, it } from 'vitest';
import { byteLength, fitElement } from '../../web/src/board/fit.js';
import { ElementSchema } from '../../src/board/schema.js';
import { stroke, text } from './factories.js';

describe('operations cut to the gateway frame limit (web/src/board/fit.ts)', () => {
  it('thins a stroke too long for one frame until it fits, keeping its first and last points and staying valid', () => {
    const pts = Array.from({ length: 4000 }, (_, i) => [i / 7 + 0.123, Math.sin(i) * 100 + 0.456] as [number, number]);
    const big = stroke('s1', 4000, { points: pts });
    expect(byteLength(JSON.stringify(big))).toBeGreaterThan(64_000);
    const fitted = fitElement(big, 64_000)!;
    expect(byteLength(JSON.stringify(fitted))).toBeLessThanOrEqual(64_000);
    const out = (fitted as { points: [number, number][] }).points;
    expect(out.length).toBeGreaterThan(1000);
    expect(out[0]).toEqual(pts[0]);
    expect(out.at(-1)).toEqual(pts.at(-1));
    expect(ElementSchema.safeParse(fitted).success).toBe(true);
  });

  it('leaves an element that fits untouched and gives up on one without points that cannot fit', () => {
    const small = stroke('s2', 20);
    expect(fitElement(small, 64_000)).toBe(small);
    expect(fitElement(text('t', 'x'.repeat(9000)), 4_000)).toBeNull();
  });
});
