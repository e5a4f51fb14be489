import { describe, expect, it } from 'vitest';
import { startPageStack } from './browser.js';

/**
 * A person keeps at most GATEWAY_MAX_SOCKETS_PER_PERSON sockets in a lesson; a
 * newer tab closes the oldest with 4409 (docs/protocol.md). The oldest tab
 * must then stop, not reconnect: reconnecting would close the newest in turn
 * and the tabs would take turns for ever. Chromium against the real gateway,
 * with the cap at 1 so two tabs are enough.
 */
const stack = await startPageStack({ GATEWAY_MAX_SOCKETS_PER_PERSON: '1' });

describe('a tab replaced by a newer one of the same person', () => {
  it('says the lesson is open in another window, stays closed, and "Continue here" takes the lesson back', async () => {
    const l = await stack.lesson('board_only', 'generic');
    const url = await l.url('s1', 'Boris', 'student');
    const older = await stack.open(url);
    const newer = await stack.open(url);

    await older.getByText('The lesson is open in another window').waitFor({ timeout: 10_000 });
    await stack.shot(older, 'replaced-older-tab');
    // it does not come back by itself (it would close the newer tab): the newer one stays connected
    await new Promise((r) => setTimeout(r, 2_000));
    expect(await newer.locator('[data-testid=connection]').getAttribute('data-state')).toBe('open');
    expect(await older.getByText('The lesson is open in another window').isVisible()).toBe(true);

    // the person picks the older window: it reconnects, and the other one is now the replaced one
    await older.getByRole('button', { name: 'Continue here' }).click();
    await older.locator('[data-testid=connection][data-state=open]').waitFor({ timeout: 30_000 });
    await newer.getByText('The lesson is open in another window').waitFor({ timeout: 10_000 });
    expect(older.errors.filter((e) => !/WebSocket/.test(e))).toEqual([]);
  });
});
