/**
 * An integration of the partner API, start to finish, with the typed client:
 * set the webhook, create a lesson (safe to retry: Idempotency-Key), issue a
 * personal link to a teacher and a student, and receive a verified webhook.
 *
 *   LESSONS_BASE_URL=https://…/api/partner/v1 LESSONS_API_KEY=wbk_… \
 *   WEBHOOK_PUBLIC_URL=https://your.host/webhooks WEBHOOK_PORT=3000 \
 *   npx tsx clients/ts/examples/integration.ts [--replace-webhook] [--wait-seconds 30]
 *
 * It never takes a live webhook away by surprise: when the key's webhook is already set to another
 * address it stops (that address keeps its events) unless `--replace-webhook` is given; when it is
 * set to this very address it rotates the secret (`rotate: true`), so a receiver still holding the
 * previous secret keeps verifying for 24 h. It waits at most `--wait-seconds` (default 30) for the
 * test event, then fails saying so.
 *
 * The receiver is plain HTTP on WEBHOOK_PORT: in production a TLS proxy in
 * front of it gives the https:// address the service requires.
 * test/api/client.test.ts runs this file against the service.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { createLessonClient, parseWebhook, type Lesson, type ParticipantLink, type WebhookEvent } from '../src/index.js';

export interface ExampleOptions {
  baseUrl: string;
  apiKey: string;
  /** the address the service delivers to (must reach `port`) */
  webhookUrl: string;
  /** where the receiver listens; 0 = any free port */
  port: number;
  /** replace a webhook already set to another address (default: refuse, and change nothing) */
  replaceWebhook?: boolean;
  /** how long to wait for the test event (default 30 s) */
  waitMs?: number;
}

/** The refusal when the key's webhook points elsewhere: nothing was changed. */
export class LiveWebhookError extends Error {
  constructor(readonly url: string) {
    super(`This API key's webhook is set to ${url}; it is left as it is. Run with --replace-webhook to point it here instead.`);
  }
}

export interface ExampleResult {
  lesson: Lesson;
  links: { teacher: ParticipantLink; student: ParticipantLink };
  /** the first verified webhook: the `webhook.test` event asked for below */
  event: WebhookEvent;
}

/** A webhook receiver: answers at once, 400 to a bad signature, drops duplicates by id. */
export async function startWebhookReceiver(port: number, secret: () => string, onEvent: (e: WebhookEvent) => void): Promise<Server> {
  const seen = new Set<number>();
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const parsed = parseWebhook(Buffer.concat(chunks), req.headers['x-whiteboard-signature'], secret());
      res.writeHead(parsed.ok ? 204 : 400).end();
      if (parsed.ok && !seen.has(parsed.event.id)) {
        seen.add(parsed.event.id);
        onEvent(parsed.event);
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return server;
}

export async function runExample(opts: ExampleOptions): Promise<ExampleResult & { server: Server }> {
  const api = createLessonClient({ baseUrl: opts.baseUrl, apiKey: opts.apiKey });
  let secret = '';
  let firstEvent!: (e: WebhookEvent) => void;
  const event = new Promise<WebhookEvent>((resolve) => (firstEvent = resolve));
  const server = await startWebhookReceiver(opts.port, () => secret, (e) => firstEvent(e));
  try {
    const webhookUrl = opts.webhookUrl.replace(':0/', `:${(server.address() as AddressInfo).port}/`);

    // 1. the webhook: a live one elsewhere is kept unless asked; the same address gets a rotated secret,
    //    which the previous one keeps signing beside for 24 h. The secret is shown only in this response.
    const current = await api.GET('/webhook');
    if (current.data && current.data.url !== webhookUrl && !opts.replaceWebhook) throw new LiveWebhookError(current.data.url);
    const hook = await api.PUT('/webhook', { body: { url: webhookUrl, rotate: current.data?.url === webhookUrl } });
    if (!hook.data) throw new Error(`PUT /webhook: ${JSON.stringify(hook.error)}`);
    secret = hook.data.secret;

    // 2. a lesson; the Idempotency-Key makes a retry after a network error return the same lesson
    const created = await api.POST('/lessons', {
      params: { header: { 'Idempotency-Key': randomUUID() } },
      body: { title: 'Algebra: quadratic equations', external_id: `course-7-${randomUUID()}`, mode: 'full', subject_mode: 'math' },
    });
    if (!created.data) throw new Error(`POST /lessons: ${JSON.stringify(created.error)}`);
    const lesson = created.data;

    // 3. one link per person, right before they enter
    const link = async (id: string, name: string, role: 'teacher' | 'student') => {
      const res = await api.POST('/lessons/{id}/links', { params: { path: { id: lesson.id } }, body: { user: { id, name, role }, ttl_minutes: 60 } });
      if (!res.data) throw new Error(`POST /lessons/{id}/links: ${JSON.stringify(res.error)}`);
      return res.data;
    };
    const links = { teacher: await link('teacher-1', 'Ann Teacher', 'teacher'), student: await link('student-1', 'Bob Student', 'student') };

    // 4. a test event proves the endpoint is reachable and the signature checks out
    const sent = await api.POST('/webhook/test');
    if (sent.response.status !== 202) throw new Error(`POST /webhook/test: ${JSON.stringify(sent.error)}`);
    const waitMs = opts.waitMs ?? 30_000;
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`No webhook.test event arrived within ${waitMs / 1000} s: can the service reach ${webhookUrl}?`)), waitMs);
    });
    const first = await Promise.race([event, timeout]).finally(() => clearTimeout(timer));
    return { lesson, links, event: first, server };
  } catch (err) {
    server.close();
    throw err;
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const env = (name: string) => process.env[name] ?? (() => { throw new Error(`${name} is not set`); })();
  const args = process.argv.slice(2);
  const wait = args.indexOf('--wait-seconds');
  try {
    const result = await runExample({
      baseUrl: env('LESSONS_BASE_URL'),
      apiKey: env('LESSONS_API_KEY'),
      webhookUrl: env('WEBHOOK_PUBLIC_URL'),
      port: Number(process.env.WEBHOOK_PORT ?? 3000),
      replaceWebhook: args.includes('--replace-webhook'),
      waitMs: wait >= 0 ? Number(args[wait + 1]) * 1000 : undefined,
    });
    console.log(`lesson ${result.lesson.id}\nteacher ${result.links.teacher.url}\nstudent ${result.links.student.url}\nwebhook ${result.event.type} #${result.event.id} verified`);
    result.server.close();
  } catch (err) {
    console.error((err as Error).message);
    process.exitCode = 1;
  }
}
