import type { Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { LAPTOP, liveTiles, startPageStack } from './browser.js';

/**
 * The video call recovers by itself and works per tab, in
 * Chromium with the fake camera and microphone against the real gateway.
 * Each page records the RTCPeerConnections it makes (an init script), so the
 * test can break one as a network failure would.
 */
const stack = await startPageStack();

const RECORD_PCS = () => {
  const Native = window.RTCPeerConnection;
  const all: RTCPeerConnection[] = [];
  (window as unknown as { __pcs: RTCPeerConnection[] }).__pcs = all;
  window.RTCPeerConnection = class extends Native {
    constructor(config?: RTCConfiguration) {
      super(config);
      all.push(this);
    }
  } as typeof RTCPeerConnection;
};

const open = (url: string) => stack.open(url, LAPTOP, RECORD_PCS);

/** Peer connections of the page that are up. */
const connectedPcs = (page: Page) => page.evaluate(() => (window as unknown as { __pcs: RTCPeerConnection[] }).__pcs.filter((pc) => pc.connectionState === 'connected').length);
const tiles = (page: Page) => page.locator('.tile:not(.self)').count();

describe('the call recovers by itself and works per tab', () => {
  it('brings a peer connection closed under it back, on both sides', async () => {
    const l = await stack.lesson('full', 'generic');
    const a = await open(await l.url('t1', 'Anna Petrova', 'teacher'));
    const b = await open(await l.url('s1', 'Boris', 'student'));
    await expect.poll(() => liveTiles(a), { timeout: 20_000 }).toBe(1);
    await expect.poll(() => liveTiles(b), { timeout: 20_000 }).toBe(1);
    // break Anna's connection as a crashed network stack would: closed, with no event on her side
    const closed = await a.evaluate(() => {
      const pcs = (window as unknown as { __pcs?: RTCPeerConnection[] }).__pcs ?? [];
      for (const pc of pcs) pc.close();
      return pcs.length;
    });
    expect(closed).toBeGreaterThan(0);
    // a new connection replaces it (the tile's state alone would still say "connected": closing fires no event)
    await expect.poll(() => connectedPcs(a), { timeout: 20_000 }).toBe(1);
    expect(await a.evaluate(() => (window as unknown as { __pcs: RTCPeerConnection[] }).__pcs.length)).toBe(closed + 1);
    await expect.poll(() => liveTiles(a), { timeout: 20_000 }).toBe(1);
    await expect.poll(() => liveTiles(b), { timeout: 20_000 }).toBe(1);
    expect(await tiles(a)).toBe(1);
    await stack.shot(a, 'call-recovered');
    await a.context().close();
    await b.context().close();
  }, 120_000);

  it('keeps calls working with one person in two tabs (laptop and tablet), and a closed tab frees its tile', async () => {
    const l = await stack.lesson('full', 'generic');
    const a = await open(await l.url('t1', 'Anna Petrova', 'teacher'));
    const studentUrl = await l.url('s1', 'Boris', 'student');
    const laptop = await open(studentUrl);
    await expect.poll(() => liveTiles(a), { timeout: 20_000 }).toBe(1);
    const tablet = await open(studentUrl);
    // Anna sees Boris twice (each tab its camera); each of Boris's tabs sees Anna
    await expect.poll(() => liveTiles(a), { timeout: 20_000 }).toBe(2);
    await expect.poll(() => liveTiles(laptop), { timeout: 20_000 }).toBe(1);
    await expect.poll(() => liveTiles(tablet), { timeout: 20_000 }).toBe(1);
    await stack.shot(a, 'call-two-tabs');
    // the tablet closes: its tile goes at once, the laptop's call stays
    await tablet.context().close();
    await expect.poll(() => tiles(a), { timeout: 5000 }).toBe(1);
    expect(await liveTiles(a)).toBe(1);
    expect(await liveTiles(laptop)).toBe(1);
    expect(a.errors).toEqual([]);
    await a.context().close();
    await laptop.context().close();
  }, 120_000);
});
