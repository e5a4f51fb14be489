/**
 * Front-end development of the participant page against the real thing: the
 * gateway (startGateway with its default lesson features, serving dist/web)
 * and the partner API in one process, on DATABASE_URL / REDIS_URL, with a
 * fresh partner, a lesson and a teacher and a student link printed. Nothing
 * here is a stand-in: change web/src, run `npm run build:web`, reload the page.
 *
 *   npx tsx web/dev/server.ts      PORT (gateway, default 8090), SUBJECT=math|physics|generic, MODE=full|board_only
 */
const USAGE = `usage: npx tsx web/dev/server.ts
The gateway (serving dist/web: run npm run build:web first) and the partner API in one process,
with a fresh partner, a lesson, and a teacher's and a student's link printed.
Environment:
  PORT=8090                      gateway port
  API_PORT=0                     partner API port (0: any free port, printed)
  SUBJECT=math|physics|generic   the lesson's toolset (default math)
  MODE=full|board_only           with or without the video call (default full)
  DATABASE_URL, REDIS_URL, ...   as for npm start (docs/configuration.md)`;
if (process.argv.includes('--help') || process.argv.includes('-h')) {
  console.log(USAGE);
  process.exit(0);
}

import { startGateway } from '../../realtime/index.js';
import { loadConfig } from '../../src/config.js';
import { SubjectModeSchema } from '../../src/domain/enums.js';
import { migrate } from '../../src/db/migrate.js';
import { createDeps } from '../../src/deps.js';
import { createApiKey } from '../../src/domain/apiKeys.js';
import { topUp } from '../../src/domain/ledger.js';
import { createLesson } from '../../src/domain/lessons.js';
import { issueLink } from '../../src/domain/links.js';
import { createPartner } from '../../src/domain/partners.js';
import { createLogger } from '../../src/logger.js';
import { startApi } from '../../src/server.js';

const config = loadConfig({ ...process.env, GATEWAY_PORT: process.env.PORT ?? '8090', API_PORT: process.env.API_PORT ?? '0' });
await migrate(config.DATABASE_URL);
const deps = createDeps(config, { log: createLogger(config.LOG_LEVEL) });
const gw = await startGateway(deps);
const api = await startApi(deps);
// before the links are printed: whoever reads one may stop the server at once (what is still
// being written then fails on the closed pool, which is no error)
let stopping = false;
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    stopping = true;
    void Promise.all([gw.close(), api.close()]).then(deps.close).finally(() => process.exit(0));
  });
}

async function printLinks(): Promise<void> {
  const partner = await createPartner(deps.sql, { name: 'dev' });
  const { apiKey } = await createApiKey(deps.sql, partner.id);
  await topUp(deps.sql, { partnerId: partner.id, minutes: 600, at: new Date() });
  const subject = SubjectModeSchema.parse(process.env.SUBJECT ?? 'math');
  const lesson = await createLesson(deps.sql, partner, { title: 'Dev lesson', subject_mode: subject, mode: process.env.MODE === 'board_only' ? 'board_only' : 'full' }, new Date());
  const base = `http://127.0.0.1:${gw.port}`;
  for (const [id, name, role] of [['t', 'Anna (teacher)', 'teacher'], ['s', 'Boris', 'student']] as const) {
    const l = await issueLink(deps.sql, { partner, lesson, input: { user: { id, name, role }, ttl_minutes: 180 }, embedBaseUrl: base, at: new Date() });
    console.log(`${role}: ${l.url}`);
  }
  console.log(`snapshot: curl -H 'authorization: Bearer ${apiKey}' http://127.0.0.1:${api.port}/api/partner/v1/lessons/${lesson.id}/snapshot`);
}
await printLinks().catch((err: unknown) => {
  if (!stopping) throw err;
});
