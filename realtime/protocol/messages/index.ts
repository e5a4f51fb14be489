import type { GatewayMessage } from '../../features/api.js';
import { cursor, cursorLeave } from './cursor.js';
import { ping } from './ping.js';

/** The message types of the gateway core; features add theirs (GatewayFeature.messages). */
export const coreMessages: GatewayMessage<any>[] = [cursor, cursorLeave, ping];
