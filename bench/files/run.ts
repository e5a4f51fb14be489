/**
 * `npm run bench:files`: the board's files at a real gateway process
 * (docs/benchmarks.md, "Board files"). HTTP clients stand for the pages.
 *
 * 1. A 5 MB phone photo (3000 x 2250, JPEG 100): scaled to 2,560 px and
 *    re-encoded as the page does (sharp here, the canvas there; timed apart),
 *    uploaded, then fetched by another participant: the time from the upload's
 *    start to the other's bytes in hand. ROUNDS photos, p50 and p99.
 * 2. 20 people opening a lesson with 30 images at once: each fetches the 30
 *    files, 4 at a time as the page does; bytes per person and the time until
 *    each has all 30.
 * 3. The gateway's resident memory while 10 people upload a photo at once,
 *    unscaled (the most a client can make it decode: 5 MB, 6.75 megapixels
 *    each), against its resident memory before.
 *
 * Options: ROUNDS (default 20).
 */
import { readFileSync } from 'node:fs';
import os from 'node:os';
import sharp from 'sharp';
import { createLesson } from '../../src/domain/lessons.js';
import { topUp } from '../../src/domain/ledger.js';
import { issueLink } from '../../src/domain/links.js';
import { createPartner } from '../../src/domain/partners.js';
import { phonePhoto } from '../../test/board/photo.js';
import { benchDatabase } from '../board/env.js';
import { spawnGateway } from '../board/fanout.js';
import { environment } from '../lib/cli.js';
import { percentile } from '../lib/service.js';

const env = environment('npm run bench:files: the board\'s files at a gateway process: a photo\'s upload and first fetch, 20 people fetching 30 images, RSS while 10 upload at once', {
  ROUNDS: { default: '20', help: 'photos uploaded and fetched for the first figure' },
});
const ROUNDS = Number(env.ROUNDS);
const rssMb = (pid: number) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) / 1024;

async function main(): Promise<void> {
  console.log(`load average at start: ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}`);
  const db = await benchDatabase('bench_files');
  const gw = await spawnGateway({ DATABASE_URL: db.config.DATABASE_URL, REDIS_URL: db.config.REDIS_URL, REDIS_KEY_PREFIX: db.config.REDIS_KEY_PREFIX, FILE_UPLOADS_PER_MINUTE: '10000' });
  const base = `http://127.0.0.1:${gw.port}`;
  try {
    const partner = await createPartner(db.deps.sql, { name: 'bench files' });
    await topUp(db.deps.sql, { partnerId: partner.id, minutes: 100_000, at: new Date() });
    const lesson = async () => {
      const l = await createLesson(db.deps.sql, partner, { title: 'files', mode: 'board_only' }, new Date());
      const token = async (id: string) => (await issueLink(db.deps.sql, { partner, lesson: l, input: { user: { id, name: id, role: 'student' }, ttl_minutes: 600 }, embedBaseUrl: base, at: new Date() })).token;
      return { id: l.id, token };
    };
    const upload = async (lessonId: string, token: string, body: Buffer) => {
      const res = await fetch(`${base}/files/${lessonId}`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'image/jpeg' }, body });
      if (res.status >= 300) throw new Error(`upload: ${res.status} ${await res.text()}`);
      return (await res.json()) as { id: string; size: number };
    };
    let retried = 0;
    const fetchFile = async (lessonId: string, token: string, id: string): Promise<number> => {
      for (let attempt = 0; ; attempt++) {
        try {
          const res = await fetch(`${base}/files/${lessonId}/${id}`, { headers: { authorization: `Bearer ${token}` } });
          if (res.status === 200) return (await res.arrayBuffer()).byteLength;
          await res.arrayBuffer();
        } catch (err) {
          if (attempt >= 3) throw err;
        }
        // as the page does: a failed fetch is tried again
        retried++;
        await new Promise((r) => setTimeout(r, 200));
      }
    };

    // each round a photo of its own (a corner painted over: the same bytes twice would be one file)
    const photo = await phonePhoto(3000, 2250);
    const variant = (i: number) =>
      sharp(photo)
        .composite([{ input: { create: { width: 40, height: 40, channels: 3, background: { r: (i * 37) % 256, g: (i * 91) % 256, b: (i * 53) % 256 } } }, left: 0, top: 0 }])
        .jpeg({ quality: 100 })
        .toBuffer();
    console.log(`photo: ${(photo.length / 1e6).toFixed(1)} MB, 3000 x 2250`);

    // 1. upload and first display
    const l1 = await lesson();
    const [author, viewer] = [await l1.token('a'), await l1.token('b')];
    const prep: number[] = [];
    const total: number[] = [];
    let wire = 0;
    for (let i = 0; i < ROUNDS; i++) {
      const original = await variant(i);
      let t = performance.now();
      const scaled = await sharp(original).resize(2560, 2560, { fit: 'inside' }).jpeg({ quality: 85 }).toBuffer();
      prep.push(performance.now() - t);
      wire = scaled.length;
      t = performance.now();
      const up = await upload(l1.id, author, scaled);
      await fetchFile(l1.id, viewer, up.id);
      total.push(performance.now() - t);
    }
    console.log(`upload of the scaled photo (${(wire / 1e6).toFixed(2)} MB) and its first fetch by another participant: p50 ${percentile(total, 50).toFixed(0)} ms, p99 ${percentile(total, 99).toFixed(0)} ms (n=${ROUNDS}); scaling on the client (sharp standing in for the canvas): p50 ${percentile(prep, 50).toFixed(0)} ms`);

    // 2. 20 people, 30 images
    const l2 = await lesson();
    const owner = await l2.token('owner');
    const ids: string[] = [];
    for (let i = 0; i < 30; i++) ids.push((await upload(l2.id, owner, await sharp(await variant(100 + i)).resize(1600).jpeg({ quality: 85 }).toBuffer())).id);
    const people = await Promise.all(Array.from({ length: 20 }, (_, i) => l2.token(`p${i}`)));
    const t0 = performance.now();
    const perPerson = await Promise.all(
      people.map(async (token) => {
        const queue = [...ids];
        let bytes = 0;
        await Promise.all(
          Array.from({ length: 4 }, async () => {
            for (let id = queue.shift(); id; id = queue.shift()) bytes += await fetchFile(l2.id, token, id);
          }),
        );
        return { bytes, ms: performance.now() - t0 };
      }),
    );
    const times = perPerson.map((p) => p.ms);
    console.log(`20 people open a lesson with 30 images (1600 px JPEG): ${(perPerson[0].bytes / 1e6).toFixed(1)} MB each, all 30 files in hand: p50 ${percentile(times, 50).toFixed(0)} ms, last ${Math.max(...times).toFixed(0)} ms (fetches tried again: ${retried})`);

    // 3. RSS while 10 people upload at once
    const l3 = await lesson();
    const uploaders = await Promise.all(Array.from({ length: 10 }, (_, i) => l3.token(`u${i}`)));
    const originals = await Promise.all(uploaders.map((_, i) => variant(200 + i)));
    const idle = rssMb(gw.proc.pid!);
    let peak = idle;
    const sampler = setInterval(() => (peak = Math.max(peak, rssMb(gw.proc.pid!))), 20);
    const t1 = performance.now();
    await Promise.all(uploaders.map((token, i) => upload(l3.id, token, originals[i])));
    clearInterval(sampler);
    console.log(`10 people upload a ${(originals[0].length / 1e6).toFixed(1)} MB photo at once (unscaled): gateway RSS ${idle.toFixed(0)} MB before, peak ${peak.toFixed(0)} MB; all stored in ${(performance.now() - t1).toFixed(0)} ms`);
  } finally {
    await gw.stop();
    await db.drop();
  }
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
