import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/lib/clock.js';
import { join } from './helpers/client.js';
import { lessonRow, lessonWithLinks } from './helpers/fixtures.js';
import { startTestGateway } from './helpers/gateway.js';

/**
 * A teacher's removal closes the person's sockets on other nodes over the
 * lesson bus, which is at most once (Redis pub/sub). Postgres's
 * `participant_removed` notification is sent if and only if the removal
 * commits, so each node also closes the person's sockets there when it hears
 * it (realtime/features/teacher/feature.ts, closeRemoved): a lost bus message
 * must not leave the removed person present, and the lesson metered as if two
 * were there. Two gateway nodes in this process, one clock.
 */
const clock = new ManualClock(new Date('2026-03-02T10:00:00Z'));
const n1 = await startTestGateway({ clock });
const n2 = await startTestGateway({ clock, env: n1.env });
const { sql } = n1.deps;

describe('a removal the other node did not hear over the bus', () => {
  it("closes the removed person's socket there with 4403 on Postgres's notice, and nothing is metered after", async () => {
    const f = await lessonWithLinks(sql, { minutes: 100 });
    const teacher = await join(n1.wsUrl(await f.link('t', { role: 'teacher', at: clock.now() })));
    const student = await join(n2.wsUrl(await f.link('s', { at: clock.now() })));
    await Promise.all([n1.settle(), n2.settle()]);
    const id = student.of('welcome')[0].you.id;

    // n2's bus subscriber connection drops (a reset, or Redis closing a slow subscriber); ioredis
    // reconnects and subscribes again by itself, but what was published meanwhile is gone
    (n2.gateway.bus as any).sub.disconnect(true);
    teacher.send({ type: 'teacher.remove', participant_id: id });
    expect(await student.waitClosed()).toBe(4403);
    await Promise.all([n1.settle(), n2.settle()]);
    const billedAtRemoval = (await lessonRow(sql, f.lesson.id)).billed_seconds;

    // 60 s pass as in production: both nodes renew their lease every 3 s, the teacher answers keepalives
    for (let i = 0; i < 20; i++) {
      clock.advance(3_000);
      await teacher.alive();
      await n1.gateway.maintenance.heartbeat();
      await n2.gateway.maintenance.heartbeat();
    }
    await n1.maintain();
    await n2.maintain();
    expect((await lessonRow(sql, f.lesson.id)).billed_seconds).toBe(billedAtRemoval);
    await teacher.close();
  });
});
