import { createHash, randomBytes } from 'node:crypto';
import net from 'node:net';
import zlib from 'node:zlib';
import sharp from 'sharp';
import { afterAll, describe, expect, it } from 'vitest';
import { ElementSchema } from '../../src/board/schema.js';
import { BoardStore } from '../../src/board/store.js';
import { archiveLesson } from '../../src/domain/lessons.js';
import { issueReplayLink } from '../../src/domain/replay.js';
import { readPreview, startTestApi } from '../helpers/api.js';
import { join } from '../realtime/helpers/client.js';
import { lessonWithLinks } from '../realtime/helpers/fixtures.js';
import { startTestGateway } from '../realtime/helpers/gateway.js';
import { del, image } from './factories.js';

/**
 * Files on the board at the gateway, against hostile uploads: every refusal
 * has its code, none is a 5xx, nothing refused or cut off is stored, and the
 * process's memory stays bounded. Small limits, so every one is reached.
 */
const gw = await startTestGateway({
  env: { FILE_MAX_BYTES: '300000', FILE_LESSON_MAX_BYTES: '200000', FILE_LESSON_MAX_FILES: '4', FILE_UPLOADS_PER_MINUTE: '8' },
});
const { sql } = gw.deps;
const api = await startTestApi({ env: gw.env });
const statuses: number[] = [];
afterAll(() => expect(statuses.filter((s) => s >= 500)).toEqual([]));

async function upload(lessonId: string, token: string | null, body: Buffer | ReadableStream, type = 'application/octet-stream') {
  const headers: Record<string, string> = { 'content-type': type };
  if (token) headers.authorization = `Bearer ${token}`;
  const res = await fetch(gw.httpUrl(`/files/${lessonId}`), { method: 'POST', headers, body, duplex: 'half' } as RequestInit);
  statuses.push(res.status);
  return { status: res.status, body: (await res.json()) as { id: string; type: string; size: number; width: number; height: number; detail?: { code: string; message: string } } };
}

async function fetchFile(lessonId: string, fileId: string, token: string, headers: Record<string, string> = {}) {
  const res = await fetch(gw.httpUrl(`/files/${lessonId}/${fileId}`), { headers: { authorization: `Bearer ${token}`, ...headers } });
  statuses.push(res.status);
  return { res, bytes: Buffer.from(await res.arrayBuffer()) };
}

const solid = (w: number, h: number, r: number) => sharp({ create: { width: w, height: h, channels: 3, background: { r, g: 80, b: 160 } } }).png().toBuffer();
const noise = (w: number, h: number) => sharp(randomBytes(w * h * 3), { raw: { width: w, height: h, channels: 3 } }).png().toBuffer();
const stored = async (lessonId: string) => (await sql<{ file_id: string }[]>`SELECT file_id FROM lesson_files WHERE lesson_id = ${lessonId}`).map((r) => r.file_id);

/** A PNG whose header claims `w` x `h` pixels around a few bytes of data: a decompression bomb. */
function bombPng(w: number, h: number): Buffer {
  const chunk = (type: string, data: Buffer) => {
    const body = Buffer.concat([Buffer.from(type, 'latin1'), data]);
    const len = Buffer.alloc(4);
    len.writeUInt32BE(data.length);
    const crc = Buffer.alloc(4);
    crc.writeUInt32BE(zlib.crc32(body));
    return Buffer.concat([len, body, crc]);
  };
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(w, 0);
  ihdr.writeUInt32BE(h, 4);
  ihdr.set([8, 0, 0, 0, 0], 8); // 8-bit greyscale
  // 1 MB of zero rows compressed to about a kilobyte: what a decoder would inflate without end
  const idat = zlib.deflateSync(Buffer.alloc(1024 * 1024));
  return Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), chunk('IHDR', ihdr), chunk('IDAT', idat), chunk('IEND', Buffer.alloc(0))]);
}

describe('uploading an image to the gateway', () => {
  it('keeps the re-encoded bytes under their sha-256 once per lesson, and serves them to its participants only', async () => {
    const f = await lessonWithLinks(sql);
    const token = await f.link('s1');
    const png = await solid(64, 48, 200);
    const first = await upload(f.lesson.id, token, png, 'image/png');
    expect(first.status).toBe(201);
    expect(first.body).toMatchObject({ type: 'image/png', width: 64, height: 48 });
    const again = await upload(f.lesson.id, await f.link('s2'), png);
    expect(again.status).toBe(200);
    expect(again.body.id).toBe(first.body.id);
    expect(await stored(f.lesson.id)).toEqual([first.body.id]);

    const { res, bytes } = await fetchFile(f.lesson.id, first.body.id, token);
    expect(res.status).toBe(200);
    expect(createHash('sha256').update(bytes).digest('hex')).toBe(first.body.id);
    expect(res.headers.get('content-type')).toBe('image/png');
    expect(res.headers.get('cache-control')).toBe('private, max-age=31536000, immutable');
    expect(res.headers.get('x-content-type-options')).toBe('nosniff');
    expect(res.headers.get('content-security-policy')).toContain("default-src 'self'");
    const etag = res.headers.get('etag')!;
    expect((await fetchFile(f.lesson.id, first.body.id, token, { 'if-none-match': etag })).res.status).toBe(304);
  });

  it('strips the metadata of a phone photo: no EXIF GPS position reaches the stored file', async () => {
    const f = await lessonWithLinks(sql);
    const photo = await sharp({ create: { width: 120, height: 90, channels: 3, background: '#3a7' } })
      .jpeg()
      .withExif({ IFD0: { Make: 'PhoneMaker', Model: 'SecretPhone' }, IFD3: { GPSLatitudeRef: 'N', GPSLatitude: '55/1 45/1 21/1', GPSLongitudeRef: 'E', GPSLongitude: '37/1 37/1 4/1' } })
      .toBuffer();
    expect((await sharp(photo).metadata()).exif).toBeDefined();
    const token = await f.link('s1');
    const up = await upload(f.lesson.id, token, photo, 'image/jpeg');
    expect(up.status).toBe(201);
    const { bytes } = await fetchFile(f.lesson.id, up.body.id, token);
    const meta = await sharp(bytes).metadata();
    expect(meta.format).toBe('jpeg');
    expect(meta.exif).toBeUndefined();
    expect(bytes.includes(Buffer.from('SecretPhone'))).toBe(false);
  });

  it('keeps the first frame of a GIF as a PNG', async () => {
    const f = await lessonWithLinks(sql);
    const gif = await sharp({ create: { width: 30, height: 20, channels: 3, background: '#f00' } }).gif().toBuffer();
    const up = await upload(f.lesson.id, await f.link('s1'), gif, 'image/gif');
    expect(up.status).toBe(201);
    expect(up.body).toMatchObject({ type: 'image/png', width: 30, height: 20 });
  });

  it('refuses a decompression bomb from its header, before decoding, with memory bounded', async () => {
    const f = await lessonWithLinks(sql);
    const bomb = bombPng(50_000, 50_000);
    expect(bomb.length).toBeLessThan(4096);
    const rss0 = process.memoryUsage().rss;
    const up = await upload(f.lesson.id, await f.link('s1'), bomb, 'image/png');
    expect(up.status).toBe(422);
    expect(up.body.detail).toEqual({ code: 'too_many_pixels', message: 'This image has more than 40 megapixels' });
    // 50,000 x 50,000 decoded would be 2.5 GB
    expect(process.memoryUsage().rss - rss0).toBeLessThan(64 * 1024 * 1024);
    expect(await stored(f.lesson.id)).toEqual([]);
  });

  it('refuses SVG (with a script), HTML, PDF and bytes that do not match their claimed type', async () => {
    const f = await lessonWithLinks(sql);
    const token = await f.link('s1');
    const svg = Buffer.from('<?xml version="1.0"?><svg xmlns="http://www.w3.org/2000/svg"><script>alert(document.cookie)</script></svg>');
    const svgUp = await upload(f.lesson.id, token, svg, 'image/svg+xml');
    expect(svgUp.status).toBe(415);
    expect(svgUp.body.detail!.code).toBe('unsupported_type');
    expect(svgUp.body.detail!.message).toMatch(/SVG and HTML/);
    expect((await upload(f.lesson.id, token, Buffer.from('<!doctype html><script>alert(1)</script>'), 'image/png')).body.detail!.code).toBe('unsupported_type');
    expect((await upload(f.lesson.id, token, Buffer.from('%PDF-1.7\n%...'), 'application/pdf')).body.detail!.code).toBe('unsupported_type');
    const jpeg = await sharp({ create: { width: 10, height: 10, channels: 3, background: '#000' } }).jpeg().toBuffer();
    const mismatch = await upload(f.lesson.id, token, jpeg, 'image/png');
    expect(mismatch.status).toBe(415);
    expect(mismatch.body.detail!.code).toBe('type_mismatch');
    // a PNG signature in front of anything else does not make an image
    const fake = Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), Buffer.from('<html><script>alert(1)</script></html>')]);
    const fakeUp = await upload(f.lesson.id, token, fake, 'image/png');
    expect(fakeUp.status).toBe(422);
    expect(fakeUp.body.detail!.code).toBe('invalid_image');
    expect(await stored(f.lesson.id)).toEqual([]);
  });

  it('keeps only the image of a polyglot: what follows or hides in it is not stored', async () => {
    const f = await lessonWithLinks(sql);
    const token = await f.link('s1');
    const gif = await sharp({ create: { width: 8, height: 8, channels: 3, background: '#00f' } }).gif().toBuffer();
    // a GIF that is also an HTML page with a script after the image's end, and a JPEG with one in a comment
    const polyglot = Buffer.concat([gif, Buffer.from('<html><script>fetch("/steal")</script></html>')]);
    const up = await upload(f.lesson.id, token, polyglot, 'image/gif');
    expect(up.status).toBe(201);
    const { res, bytes } = await fetchFile(f.lesson.id, up.body.id, token);
    expect(res.headers.get('content-type')).toBe('image/png');
    expect(bytes.includes(Buffer.from('<script'))).toBe(false);
    const jpeg = await sharp({ create: { width: 8, height: 8, channels: 3, background: '#0f0' } }).jpeg().toBuffer();
    const comment = Buffer.from('<script>alert(1)</script>');
    const com = Buffer.concat([Buffer.from([0xff, 0xfe, 0, comment.length + 2]), comment]);
    const withComment = Buffer.concat([jpeg.subarray(0, 2), com, jpeg.subarray(2)]);
    const up2 = await upload(f.lesson.id, token, withComment, 'image/jpeg');
    expect(up2.status).toBe(201);
    expect((await fetchFile(f.lesson.id, up2.body.id, token)).bytes.includes(Buffer.from('<script'))).toBe(false);
  });
});

describe('who may upload and fetch', () => {
  it("refuses another lesson's link, its files, no link, an archived lesson and a removed person", async () => {
    const a = await lessonWithLinks(sql);
    const b = await lessonWithLinks(sql);
    const tokenA = await a.link('s1');
    const tokenB = await b.link('s1');
    const png = await solid(16, 16, 10);
    const fileA = (await upload(a.lesson.id, tokenA, png)).body.id;

    // another lesson's link, for this lesson's file: refused; and asked for within its own lesson: not there
    expect((await fetchFile(a.lesson.id, fileA, tokenB)).res.status).toBe(403);
    expect((await fetchFile(b.lesson.id, fileA, tokenB)).res.status).toBe(404);
    expect((await upload(a.lesson.id, tokenB, png)).status).toBe(403);
    const anonymous = await fetch(gw.httpUrl(`/files/${a.lesson.id}/${fileA}`));
    expect(anonymous.status).toBe(401);
    expect((await upload(a.lesson.id, null, png)).status).toBe(401);
    // the token in the URL is not read
    expect((await fetch(gw.httpUrl(`/files/${a.lesson.id}/${fileA}?token=${tokenA}`))).status).toBe(401);

    // a removed person: refused as at the upgrade
    const teacher = await join(gw.wsUrl(await b.link('t', { role: 'teacher' })));
    const student = await join(gw.wsUrl(tokenB));
    await gw.settle();
    teacher.send({ type: 'teacher.remove', participant_id: student.of('welcome')[0].you.id });
    expect(await student.waitClosed()).toBe(4403);
    const removed = await upload(b.lesson.id, tokenB, png);
    expect(removed.status).toBe(403);
    expect(removed.body.detail!.code).toBe('removed');
    await teacher.close();

    await archiveLesson(sql, a.partner.id, a.lesson.id, new Date());
    await gw.settle();
    expect((await fetchFile(a.lesson.id, fileA, tokenA)).res.status).toBe(410);
    expect((await upload(a.lesson.id, tokenA, await solid(16, 16, 11))).status).toBe(410);
  });
});

describe('limits', () => {
  it("serves a lesson's files to its replay link too, which uploads nothing and opens no other lesson's files", async () => {
    const a = await lessonWithLinks(sql);
    const b = await lessonWithLinks(sql);
    const fileA = (await upload(a.lesson.id, await a.link('s1'), await solid(16, 16, 30))).body.id;
    const fileB = (await upload(b.lesson.id, await b.link('s1'), await solid(16, 16, 40))).body.id;
    const replay = (lesson: typeof a.lesson, ttlMinutes = 60, at = gw.deps.clock.now()) =>
      issueReplayLink(sql, { lesson, ttlMinutes, embedBaseUrl: 'http://x', at }).then((r) => r.token);
    const tokenA = await replay(a.lesson);

    const got = await fetchFile(a.lesson.id, fileA, tokenA);
    expect(got.res.status).toBe(200);
    expect(got.res.headers.get('content-type')).toBe('image/png');
    expect((await fetchFile(b.lesson.id, fileB, tokenA)).res.status).toBe(403);
    expect((await upload(a.lesson.id, tokenA, await solid(16, 16, 50))).status).toBe(401);
    // an expired replay link opens nothing
    const expired = await replay(a.lesson, 15, new Date(gw.deps.clock.now().getTime() - 16 * 60_000));
    expect((await fetchFile(a.lesson.id, fileA, expired)).res.status).toBe(401);
  });

  it('refuses a file over FILE_MAX_BYTES, told by its length or found while reading, and stores nothing', async () => {
    const f = await lessonWithLinks(sql);
    const token = await f.link('s1');
    const big = await upload(f.lesson.id, token, randomBytes(300_001));
    expect(big.status).toBe(413);
    expect(big.body.detail).toEqual({ code: 'too_large', message: 'This image is larger than 0.3 MB' });
    // chunked: no length to go by
    const chunks = [randomBytes(200_000), randomBytes(200_000)];
    const stream = new ReadableStream({ pull: (c) => (chunks.length ? c.enqueue(chunks.shift()!) : c.close()) });
    expect((await upload(f.lesson.id, token, stream)).status).toBe(413);
    expect(await stored(f.lesson.id)).toEqual([]);
  });

  it("refuses the file past the lesson's bytes and past its number of files", async () => {
    const f = await lessonWithLinks(sql);
    const ok1 = await upload(f.lesson.id, await f.link('s1'), await noise(150, 150));
    const ok2 = await upload(f.lesson.id, await f.link('s2'), await noise(150, 150));
    expect([ok1.status, ok2.status]).toEqual([201, 201]);
    const third = await upload(f.lesson.id, await f.link('s3'), await noise(150, 150));
    expect(third.status).toBe(409);
    expect(third.body.detail!.code).toBe('lesson_full');
    expect(await stored(f.lesson.id)).toHaveLength(2);

    const g = await lessonWithLinks(sql);
    const token = await g.link('s1');
    for (let i = 0; i < 4; i++) expect((await upload(g.lesson.id, token, await solid(8, 8, i))).status).toBe(201);
    const fifth = await upload(g.lesson.id, token, await solid(8, 8, 99));
    expect(fifth.body.detail).toEqual({ code: 'lesson_full', message: 'This lesson already holds 4 files' });
    // the same bytes again cost nothing
    expect((await upload(g.lesson.id, await g.link('s2'), await solid(8, 8, 0))).status).toBe(200);
  });

  it('refuses uploads past FILE_UPLOADS_PER_MINUTE of one person, with Retry-After', async () => {
    const f = await lessonWithLinks(sql);
    const token = await f.link('s1');
    const png = await solid(8, 8, 1);
    for (let i = 0; i < 8; i++) expect((await upload(f.lesson.id, token, png)).status).toBeLessThan(300);
    const res = await fetch(gw.httpUrl(`/files/${f.lesson.id}`), { method: 'POST', headers: { authorization: `Bearer ${token}` }, body: png });
    statuses.push(res.status);
    expect(res.status).toBe(429);
    expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
    // another person of the lesson is not held up
    expect((await upload(f.lesson.id, await f.link('s2'), png)).status).toBe(200);
  });

  it('stores nothing of an upload cut off halfway, and goes on serving', async () => {
    const f = await lessonWithLinks(sql);
    const token = await f.link('s1');
    const png = await noise(120, 120);
    await new Promise<void>((resolve, reject) => {
      const s = net.connect(gw.port, '127.0.0.1', () => {
        s.write(`POST /files/${f.lesson.id} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\nContent-Type: image/png\r\nContent-Length: ${png.length}\r\n\r\n`);
        s.write(png.subarray(0, png.length >> 1), () => setTimeout(() => s.destroy(), 100));
      });
      s.on('close', () => resolve());
      s.on('error', reject);
    });
    // The whole file, sent after the cut: the gateway handles the cut before this request, so an
    // upload made of the half would have been on its way through the same steps first. The whole
    // file is new (201, not 200) and the only one stored.
    const whole = await upload(f.lesson.id, token, png);
    expect(whole.status).toBe(201);
    expect(await stored(f.lesson.id)).toEqual([whole.body.id]);
  });
});

describe('image elements on the board', () => {
  const board = new BoardStore(sql);
  const teacher = { role: 'teacher' as const };
  const apply = (lessonId: string, op: Parameters<BoardStore['commitBatch']>[1][number]['op'], actor: { role: 'teacher' | 'student' } = teacher) =>
    board.commitBatch(lessonId, [{ op, actor }], new Date());

  it('name a file by its sha-256 and carry scale and crop; anything else is refused by the schema', () => {
    const ok = image('i1', 'a'.repeat(64), { scale: [-1, 1], crop: { x: 10, y: 0, width: 50, height: 40, natural_width: 200, natural_height: 100 } });
    expect(ElementSchema.parse(ok)).toEqual(ok);
    expect(ElementSchema.safeParse(image('i1', '../etc/passwd')).success).toBe(false);
    expect(ElementSchema.safeParse(image('i1', 'a'.repeat(64), { scale: [2, 1] })).success).toBe(false);
    expect(ElementSchema.safeParse(image('i1', 'a'.repeat(64), { status: 'error' })).success).toBe(false);
  });

  it('keep their file while deleted (an undo revives them), and the snapshot lists the files and names them', async () => {
    const f = await lessonWithLinks(sql);
    const token = await f.link('s1');
    const file = (await upload(f.lesson.id, token, await solid(40, 30, 7))).body;
    // placed while uploading under its author's id, then saved under the file's
    await apply(f.lesson.id, { type: 'element.add', elements: [image('img', 'b'.repeat(64), { status: 'pending' })] });
    await apply(f.lesson.id, { type: 'element.update', elements: [image('img', file.id, { version: 2 })] });
    // a student's older write of the element loses, as for any element (a teacher's would be restamped: docs/board.md)
    const stale = await apply(f.lesson.id, { type: 'element.update', elements: [image('img', 'b'.repeat(64), { status: 'pending', version: 2, version_nonce: 5 })] }, { role: 'student' });
    expect(stale[0]).toMatchObject({ ok: true, seq: null });
    await apply(f.lesson.id, { type: 'element.delete', elements: [del('img', 3)] });
    expect((await fetchFile(f.lesson.id, file.id, token)).res.status).toBe(200);
    let snap = (await api.request('GET', `/lessons/${f.lesson.id}/snapshot`, { key: f.apiKey })).body;
    expect(snap.elements).toEqual([]);
    expect(snap.files).toEqual([{ id: file.id, type: 'image/png', size: file.size, width: 40, height: 30 }]);
    await apply(f.lesson.id, { type: 'element.update', elements: [image('img', file.id, { version: 4 })] });
    snap = (await api.request('GET', `/lessons/${f.lesson.id}/snapshot`, { key: f.apiKey })).body;
    expect(snap.elements).toEqual([image('img', file.id, { version: 4 })]);
    expect(snap.files.map((x: { id: string }) => x.id)).toEqual([file.id]);
  });
});

describe('the preview', () => {
  it("draws the page's images from their files", async () => {
    const f = await lessonWithLinks(sql);
    const magenta = await sharp({ create: { width: 300, height: 200, channels: 3, background: { r: 255, g: 0, b: 255 } } }).png().toBuffer();
    const file = (await upload(f.lesson.id, await f.link('s1'), magenta)).body;
    await new BoardStore(sql).commitBatch(f.lesson.id, [{ op: { type: 'element.add', elements: [image('img', file.id, { width: 300, height: 200 })] }, actor: { role: 'teacher' } }], new Date());
    const res = await readPreview(api.base, f.lesson.id, f.apiKey);
    expect(res.status).toBe(200);
    const { data, info } = await sharp(Buffer.from(await res.arrayBuffer())).removeAlpha().raw().toBuffer({ resolveWithObject: true });
    let n = 0;
    for (let i = 0; i < data.length; i += info.channels) if (data[i] > 215 && data[i + 1] < 40 && data[i + 2] > 215) n++;
    // most of the picture: the image is the page's only element
    expect(n).toBeGreaterThan((info.width * info.height) / 3);
  }, 60_000);
});

describe('GET /lessons/{id}/files/{file_id} (the partner API)', () => {
  it('answers the bytes with an ETag that answers 304, and nothing of another lesson, partner or an archived lesson', async () => {
    const f = await lessonWithLinks(sql);
    const file = (await upload(f.lesson.id, await f.link('s1'), await solid(20, 10, 3))).body;
    const get = (lessonId: string, fileId: string, key = f.apiKey, headers: Record<string, string> = {}) =>
      fetch(`${api.base}/api/partner/v1/lessons/${lessonId}/files/${fileId}`, { headers: { authorization: `Bearer ${key}`, ...headers } });
    const res = await get(f.lesson.id, file.id);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('image/png');
    expect(res.headers.get('etag')).toBe(`"${file.id}"`);
    expect(createHash('sha256').update(Buffer.from(await res.arrayBuffer())).digest('hex')).toBe(file.id);
    expect((await get(f.lesson.id, file.id, f.apiKey, { 'if-none-match': `"${file.id}"` })).status).toBe(304);
    expect((await get(f.lesson.id, 'c'.repeat(64))).status).toBe(404);
    const other = await lessonWithLinks(sql);
    expect((await get(other.lesson.id, file.id, other.apiKey)).status).toBe(404);
    expect((await get(f.lesson.id, file.id, other.apiKey)).status).toBe(404);
    await archiveLesson(sql, f.partner.id, f.lesson.id, new Date());
    expect((await get(f.lesson.id, file.id)).status).toBe(410);
  });
});
