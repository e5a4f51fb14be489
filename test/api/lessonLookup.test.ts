import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../src/db/index.js';
import { batchedLessonLookup, createLesson } from '../../src/domain/lessons.js';
import { apiError, startTestApi } from '../helpers/api.js';
import { testConfig } from '../helpers/deps.js';
import { partnerFactory, type PartnerFixture } from '../helpers/factories.js';

const api = await startTestApi();
let a: PartnerFixture;
let b: PartnerFixture;
const aLessons: string[] = [];
let bLesson: string;
beforeAll(async () => {
  a = await partnerFactory(api.deps.sql);
  b = await partnerFactory(api.deps.sql);
  for (let i = 0; i < 5; i++) aLessons.push((await createLesson(api.deps.sql, a.partner, { title: `a${i}` }, new Date())).id);
  bLesson = (await createLesson(api.deps.sql, b.partner, { title: 'b' }, new Date())).id;
});

describe('batched lesson lookups (batchedLessonLookup, src/domain/lessons.ts)', () => {
  // a connection of its own that counts the statements it sends (postgres.js `debug`)
  const statements: string[] = [];
  const counted = postgres(testConfig().DATABASE_URL, { max: 1, debug: (_c, query) => statements.push(query), onnotice: () => {} });
  beforeAll(async () => {
    await counted`SELECT 1`; // postgres.js fetches the array types on connect: not ours to count
  });
  afterAll(() => counted.end());

  it('sends the lookups of one event-loop turn as one statement, each answered for its own partner', async () => {
    const lookup = batchedLessonLookup(counted as unknown as Db, { max: 100, concurrency: 1 });
    statements.length = 0;
    const [a0, a1, bAsksA0, b0, aAsksB0, missing, nul] = await Promise.all([
      lookup(a.partner.id, aLessons[0]),
      lookup(a.partner.id, aLessons[1]),
      lookup(b.partner.id, aLessons[0]), // the same id as the first, asked by another partner in the same batch
      lookup(b.partner.id, bLesson),
      lookup(a.partner.id, bLesson),
      lookup(a.partner.id, 'lsn_doesnotexist'),
      lookup(a.partner.id, 'lsn_\0'), // Postgres text cannot hold NUL: not found, and the batch still answers
    ]);
    expect(statements).toHaveLength(1);
    expect([a0?.id, a1?.id, b0?.id]).toEqual([aLessons[0], aLessons[1], bLesson]);
    expect([bAsksA0, aAsksB0, missing, nul]).toEqual([undefined, undefined, undefined, undefined]);

    // a later turn is a batch of its own
    await lookup(a.partner.id, aLessons[2]);
    expect(statements).toHaveLength(2);
  });

  it('splits a turn into batches of at most `max`', async () => {
    const lookup = batchedLessonLookup(counted as unknown as Db, { max: 2, concurrency: 1 });
    statements.length = 0;
    const found = await Promise.all(aLessons.map((id) => lookup(a.partner.id, id)));
    expect(found.map((l) => l?.id)).toEqual(aLessons);
    expect(statements).toHaveLength(3);
  });
});

describe('GET /lessons/{id} under concurrent requests of two partners', () => {
  it("answers every request for its own partner: the other partner's lesson is 404 even in the same batch", async () => {
    const asks: { key: string; id: string; status: number }[] = [];
    for (let i = 0; i < 8; i++) {
      for (const id of aLessons) asks.push({ key: a.apiKey, id, status: 200 }, { key: b.apiKey, id, status: 404 });
      asks.push({ key: b.apiKey, id: bLesson, status: 200 }, { key: a.apiKey, id: bLesson, status: 404 }, { key: a.apiKey, id: 'lsn_missing', status: 404 });
    }
    const res = await Promise.all(asks.map((q) => api.request('GET', `/lessons/${q.id}`, { key: q.key })));
    expect(res.map((r) => r.status)).toEqual(asks.map((q) => q.status));
    res.forEach((r, i) => {
      if (asks[i].status === 200) expect(r.body.id).toBe(asks[i].id);
      else expect(r.body).toEqual(apiError('not_found'));
    });
  });
});
