import { afterAll, describe, expect, it, vi } from 'vitest';
import { resolveLinkToken, type ResolvedLink } from '../../src/domain/links.js';
import { Removals } from '../../realtime/features/teacher/removals.js';
import { publicPersonId } from '../../src/domain/people.js';
import { fileDeps } from '../helpers/deps.js';
import { isolatedEnv } from '../helpers/isolation.js';
import { lessonWithLinks } from '../realtime/helpers/fixtures.js';

/**
 * The removal check of every upgrade and page load (realtime/features/teacher/removals.ts),
 * as two gateway nodes hold it: two Removals on their own Postgres connections (each with its
 * own LISTEN connection), against the real database. The gateway-level behaviour (4403, 403 at
 * the upgrade and the page, on every node) is in gateway.test.ts.
 */
// a database of its own: the test cuts the LISTEN connections of its database, which in the shared
// one would include those of the file running beside it (whose API's start would then fail)
const env = await isolatedEnv();
const one = fileDeps({ env });
const two = fileDeps({ env });
const nodeA = new Removals(one);
const nodeB = new Removals(two);
await Promise.all([nodeA.start(), nodeB.start()]);

async function people(n: number) {
  const f = await lessonWithLinks(one.sql);
  const links: ResolvedLink[] = [];
  for (let i = 0; i < n; i++) links.push((await resolveLinkToken(one.sql, await f.link(`student-${i}`)))!);
  const personOf = (l: ResolvedLink) => publicPersonId(l.lesson_id, l.user_hash);
  return { f, links, personOf };
}

describe('removals: checked at every upgrade, read from Postgres once per node (and LISTEN connection)', () => {
  it('answers a class arriving at once, and every later arrival, with no read: the node read the removals that can still refuse a link when it started', async () => {
    const { links } = await people(20);
    const before = nodeA.readsMade;
    expect(await Promise.all(links.slice(0, 10).map((l) => nodeA.isRemoved(l)))).toEqual(Array(10).fill(false));
    for (const l of links.slice(10)) expect(await nodeA.isRemoved(l)).toBe(false);
    expect(nodeA.readsMade - before).toBe(0);
  });

  it('reads only the removals that can still refuse a link: none older than the longest link lifetime (12 h)', async () => {
    const { f, links, personOf } = await people(2);
    const old = new Date(Date.now() - 13 * 3600_000);
    await one.sql`INSERT INTO lesson_removals (lesson_id, person_id, removed_at, removed_by)
                  VALUES (${f.lesson.id}, ${personOf(links[0])}, ${old}, 'teacher'), (${f.lesson.id}, ${personOf(links[1])}, now(), 'teacher')`;
    const later = new Removals(two);
    await later.start();
    // the 13-hour-old removal refuses nothing: every link issued before it has expired (its own link was issued after it)
    expect(await later.isRemoved(links[0])).toBe(false);
    expect(await later.isRemoved(links[1])).toBe(true);
    expect(later.readsMade).toBe(2); // the set, and the exact check of the one person in it
    await later.stop();
  });

  it("refuses a removed person's older links on another node at once (the notification), not a link issued later nor anyone else", async () => {
    const { f, links, personOf } = await people(3);
    await Promise.all(links.map((l) => nodeB.isRemoved(l))); // node B knows the lesson: nobody removed
    await nodeA.remove(f.lesson.id, personOf(links[0]), 'teacher', new Date());
    expect(await nodeA.isRemoved(links[0])).toBe(true); // the remover's node, without waiting for anything
    await vi.waitFor(async () => expect(await nodeB.isRemoved(links[0])).toBe(true));
    expect(await nodeB.isRemoved(links[1])).toBe(false);
    // the partner let them back in: a link issued after the removal works
    const again = (await resolveLinkToken(one.sql, await f.link('student-0', { at: new Date(Date.now() + 1000) })))!;
    expect(publicPersonId(again.lesson_id, again.user_hash)).toBe(personOf(links[0]));
    expect(await nodeB.isRemoved(again)).toBe(false);
  });

  it('reads removals made before the node knew the lesson (a node started later)', async () => {
    const { f, links, personOf } = await people(2);
    await nodeA.remove(f.lesson.id, personOf(links[1]), 'teacher', new Date());
    const later = new Removals(two);
    await later.start();
    expect(await later.isRemoved(links[1])).toBe(true);
    expect(await later.isRemoved(links[0])).toBe(false);
    await later.stop();
  });

  it('reads the removals again when its LISTEN connection comes back: a removal missed meanwhile is refused', async () => {
    const { f, links, personOf } = await people(2);
    expect(await nodeB.isRemoved(links[0])).toBe(false);
    const reads = nodeB.readsMade;
    // the LISTEN connections drop; a removal is stored without its notification (as one made while they were down)
    await one.sql`SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                  WHERE datname = current_database() AND query ILIKE 'listen %' AND pid <> pg_backend_pid()`;
    await one.sql`INSERT INTO lesson_removals (lesson_id, person_id, removed_at, removed_by)
                  VALUES (${f.lesson.id}, ${personOf(links[0])}, now(), 'teacher')`;
    await vi.waitFor(
      async () => {
        expect(await nodeB.isRemoved(links[0])).toBe(true);
      },
      { timeout: 10_000 },
    );
    expect(nodeB.readsMade).toBeGreaterThan(reads);
    // and it hears removals again on the new connection
    await nodeA.remove(f.lesson.id, personOf(links[1]), 'teacher', new Date());
    await vi.waitFor(async () => expect(await nodeB.isRemoved(links[1])).toBe(true));
  });

  it('checks exactly when the bus told of a removal first (rumoured), whatever the node knows', async () => {
    const { f, links, personOf } = await people(1);
    expect(await nodeB.isRemoved(links[0])).toBe(false);
    // stored without a notification: node B's set does not have the person, the exact check does
    await one.sql`INSERT INTO lesson_removals (lesson_id, person_id, removed_at, removed_by)
                  VALUES (${f.lesson.id}, ${personOf(links[0])}, now(), 'teacher')`;
    expect(await nodeB.isRemoved(links[0])).toBe(false);
    expect(await nodeB.isRemoved(links[0], true)).toBe(true);
  });
});

afterAll(() => Promise.all([nodeA.stop(), nodeB.stop()]));
