import type { Deps } from '../../src/deps.js';
import type { GatewayFeature } from './api.js';
import { boardFeature } from './board/feature.js';
import { callFeature } from './call/feature.js';
import { MediaStates } from './call/media.js';
import { chatFeature } from './chat/feature.js';
import { followFeature } from './follow/feature.js';
import { BoardService } from './board/service.js';
import { linksFeature } from './links/feature.js';
import { pageFeature } from './page/feature.js';
import { replayFeature } from './replay/feature.js';
import { teacherFeature } from './teacher/feature.js';
import { Removals } from './teacher/removals.js';

/**
 * The lesson itself on the gateway (docs/board.md, "Wiring into the
 * gateway"): the board, teacher rights, revoked links, the video call's signalling, chat,
 * following a view, the participant page and the read-only replay page. startGateway uses these unless given its own list.
 * Each feature keeps its per-lesson state on the gateway's Lesson
 * (realtime/lesson/Lesson.ts) and talks to other nodes through it.
 */
export function defaultFeatures(deps: Deps): GatewayFeature[] {
  const removals = new Removals(deps);
  const media = new MediaStates(deps.redis);
  return [boardFeature(deps, new BoardService(deps)), teacherFeature(deps, media, removals), linksFeature(deps), callFeature(deps, media), chatFeature(deps), followFeature(deps), replayFeature(deps), pageFeature(deps)];
}
