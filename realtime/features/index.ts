import type { Deps } from '../../src/deps.js';
import type { GatewayFeature } from '../features.js';
import { boardFeature } from './board/feature.js';
import { callFeature } from './call/feature.js';
import { MediaStates } from './call/media.js';
import { chatFeature } from './chat/feature.js';
import { LessonHub } from './hub.js';
import { pageFeature } from './page/feature.js';
import { teacherFeature } from './teacher/feature.js';
import { Removals } from './teacher/removals.js';

/**
 * The lesson itself on the gateway (docs/board.md, "Wiring into the
 * gateway"): the board, teacher rights, the video call's signalling, chat,
 * and the participant page. startGateway uses these unless given its own list.
 * `board` comes first: its welcome hook makes the lesson live on this node
 * (board feed, person relay) before the others run.
 */
export function defaultFeatures(deps: Deps): GatewayFeature[] {
  const removals = new Removals(deps.sql, deps.readSql);
  const hub = new LessonHub(deps, (conn) => removals.isRemoved(conn.link));
  const media = new MediaStates(deps.redis);
  return [boardFeature(hub), teacherFeature(deps, hub, media, removals), callFeature(deps, hub, media), chatFeature(deps), pageFeature(deps)];
}
