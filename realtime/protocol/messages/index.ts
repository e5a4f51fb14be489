import type { MessageDef } from '../registry.js';
import { cursor, cursorLeave } from './cursor.js';
import { ping } from './ping.js';

/** The message types of the gateway core; features add theirs (GatewayFeature.messages). */
export const coreMessages: MessageDef<any>[] = [cursor, cursorLeave, ping];
