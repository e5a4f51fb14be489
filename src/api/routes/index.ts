import type { RouteDef } from '../route.js';
import { balanceRoutes } from './balance/balance.js';
import { boardRoutes } from './board/board.js';
import { callsRoutes } from './calls/calls.js';
import { lessonRoutes } from './lessons/lessons.js';
import { linkRoutes } from './links/links.js';
import { usageRoutes } from './usage/usage.js';
import { webhookRoutes } from './webhook/webhook.js';
import { eventRoutes } from './events/events.js';
import { attendanceRoutes } from './attendance/attendance.js';
import { participantRoutes } from './participants/participants.js';
import { replayRoutes } from './replay/replay.js';

/**
 * Every partner route, in one list: the router mounts these and the OpenAPI
 * document is generated from them. A new route group adds one line here.
 */
export const partnerRoutes: RouteDef[] = [...lessonRoutes, ...linkRoutes, ...participantRoutes, ...attendanceRoutes, ...balanceRoutes, ...boardRoutes, ...replayRoutes, ...usageRoutes, ...callsRoutes, ...webhookRoutes, ...eventRoutes];
