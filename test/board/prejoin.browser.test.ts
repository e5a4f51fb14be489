import type { Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { drawRect, showsExactly } from './actions.js';
import { LAPTOP, liveTiles, PHONE, startPageStack } from './browser.js';

/**
 * Joining the call as people expect, in Chromium with the fake camera and microphone: a fresh tab
 * shows the camera preview and the choice of devices, nobody sees or hears the person before they
 * join, the board works meanwhile, a reload joins again with the same devices, and a refused or
 * missing device is said in words while the person still joins to see and hear the others.
 * Screenshots: test-artifacts/prejoin-*.png.
 */
// the browser a person runs: the headless shell gives the same camera a new id after a reload
const stack = await startPageStack({}, 'full');

const choiceOf = (page: Page) => page.evaluate(() => JSON.parse(sessionStorage.getItem('call.choice') ?? 'null'));

/** getUserMedia refused as the browser does when the person blocked the page, or has no such device. */
const refuse = (name: 'NotAllowedError' | 'NotFoundError') =>
  `navigator.mediaDevices.getUserMedia = () => Promise.reject(new DOMException('refused', ${JSON.stringify(name)}));`;

describe('joining the call', () => {
  it('shows the camera preview and devices first, joins with the choice, and a reload joins again with the same devices', async () => {
    const l = await stack.lesson('full', 'generic');
    const teacher = await stack.open(await l.url('t1', 'Anna Petrova', 'teacher'));
    const boris = await stack.open(await l.url('s1', 'Boris', 'student'), LAPTOP, undefined, { askToJoin: true });

    // the preview: his own camera playing, cameras and microphones to choose from
    await boris.getByTestId('prejoin').waitFor();
    await boris.waitForFunction(() => (document.querySelector<HTMLVideoElement>('[data-testid=preview]')?.videoWidth ?? 0) > 0, null, { timeout: 20_000 });
    expect(await boris.getByTestId('choose-camera').locator('option').count()).toBeGreaterThan(0);
    expect(await boris.getByTestId('choose-mic').locator('option').count()).toBeGreaterThan(0);
    const camera = await boris.getByTestId('choose-camera').inputValue();
    expect(camera).not.toBe('');
    // nothing goes to the others yet: no tile for him on the teacher's page, no toggles of the call
    expect(await boris.getByTestId('toggle-mic').count()).toBe(0);
    expect(await teacher.locator('.tile:not(.self)').count()).toBe(0);
    // the board works meanwhile
    await drawRect(boris, [300, 250], [160, 100]);
    await showsExactly(teacher, 1);
    await stack.shot(boris, 'prejoin-preview');
    // he turns his camera off before joining
    await boris.getByTestId('prejoin-camera').click();
    await boris.getByTestId('prejoin-camera').filter({ hasText: 'Camera off' }).waitFor();

    await boris.getByTestId('join-call').click();
    await boris.getByTestId('toggle-camera').filter({ hasText: 'Camera off' }).waitFor();
    await boris.getByTestId('toggle-mic').filter({ hasText: 'Mic on' }).waitFor();
    await expect.poll(() => liveTiles(teacher), { timeout: 30_000 }).toBe(1);
    await expect.poll(() => liveTiles(boris), { timeout: 30_000 }).toBe(1);
    // the tab keeps what he chose, with the camera the preview used
    const kept = await choiceOf(boris);
    expect(kept).toMatchObject({ joined: true, camera: false, mic: true, cameraId: camera });
    await stack.shot(boris, 'prejoin-joined');

    // a reload joins again at once, with the same camera and the camera still off
    await boris.reload();
    await boris.locator('[data-testid=board][data-loaded=true]').waitFor({ timeout: 30_000 });
    await boris.getByTestId('toggle-camera').filter({ hasText: 'Camera off' }).waitFor({ timeout: 20_000 });
    expect(await boris.getByTestId('prejoin').count()).toBe(0);
    await expect.poll(() => liveTiles(boris), { timeout: 30_000 }).toBe(1);
    await expect.poll(() => liveTiles(teacher), { timeout: 30_000 }).toBe(1);
    expect(await boris.evaluate(() => (document.querySelector<HTMLVideoElement>('.tile.self video')?.srcObject as MediaStream | null)?.getVideoTracks()[0]?.getSettings().deviceId)).toBe(camera);
    expect(boris.errors).toEqual([]);
    await teacher.context().close();
    await boris.context().close();
  }, 180_000);

  it('says so when the browser blocks camera and microphone, and the person still joins to see and hear the others', async () => {
    const l = await stack.lesson('full', 'generic');
    const teacher = await stack.open(await l.url('t1', 'Anna Petrova', 'teacher'));
    const boris = await stack.open(await l.url('s1', 'Boris', 'student'), LAPTOP, new Function(refuse('NotAllowedError')) as () => void, { askToJoin: true });
    const problem = boris.getByTestId('media-problem');
    await problem.waitFor({ timeout: 20_000 });
    expect(await problem.textContent()).toMatch(/blocked your camera and microphone.*You can still join to see and hear the others/);
    expect(await boris.getByTestId('prejoin-camera').isDisabled()).toBe(true);
    await stack.shot(boris, 'prejoin-blocked');
    await boris.getByRole('button', { name: 'Join without camera and microphone' }).click();
    // listening: the teacher seen and heard, his own toggles off and disabled
    await expect.poll(() => liveTiles(boris), { timeout: 30_000 }).toBe(1);
    expect(await boris.getByTestId('toggle-mic').isDisabled()).toBe(true);
    await stack.shot(boris, 'prejoin-listening');
    await teacher.context().close();
    await boris.context().close();
  }, 120_000);

  it('says so on a phone with no camera or microphone, in the panel the call waits in', async () => {
    const l = await stack.lesson('full', 'generic');
    const boris = await stack.open(await l.url('s1', 'Boris', 'student'), PHONE, new Function(refuse('NotFoundError')) as () => void, { askToJoin: true });
    // the panel is closed: its button says the call waits to be joined
    await boris.getByTestId('call-waiting').waitFor();
    await boris.getByTestId('panel-toggle').tap();
    const problem = boris.getByTestId('media-problem');
    await problem.waitFor({ timeout: 20_000 });
    expect(await problem.textContent()).toMatch(/No camera or microphone was found/);
    await stack.shot(boris, 'prejoin-phone-no-devices');
    // nothing in the panel is cut off
    expect(await boris.evaluate(() => [document.documentElement.scrollWidth, document.documentElement.scrollHeight])).toEqual([390, 844]);
    await boris.getByRole('button', { name: 'Join without camera and microphone' }).tap();
    await boris.getByTestId('toggle-mic').waitFor();
    expect(await boris.getByTestId('call-waiting').count()).toBe(0);
    await boris.context().close();
  }, 120_000);

  it('fits the preview and the choice beside the board of a phone on its side (844 x 390)', async () => {
    const l = await stack.lesson('full', 'generic');
    const boris = await stack.open(await l.url('s1', 'Boris', 'student'), { ...PHONE, viewport: { width: 844, height: 390 } }, undefined, { askToJoin: true });
    await boris.waitForFunction(() => (document.querySelector<HTMLVideoElement>('[data-testid=preview]')?.videoWidth ?? 0) > 0, null, { timeout: 20_000 });
    await stack.shot(boris, 'prejoin-phone-landscape');
    expect(await boris.evaluate(() => [document.documentElement.scrollWidth, document.documentElement.scrollHeight])).toEqual([844, 390]);
    // the whole of the choice can be reached in the panel, and joining works from there
    await boris.getByTestId('join-call').scrollIntoViewIfNeeded();
    await boris.getByTestId('join-call').tap();
    await boris.getByTestId('toggle-mic').filter({ hasText: 'Mic on' }).waitFor();
    await boris.context().close();
  }, 120_000);
});
