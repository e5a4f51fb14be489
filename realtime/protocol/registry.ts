import { z } from 'zod';
import type { ErrorCode } from './errors.js';

/**
 * One inbound message type: its handler and the zod schema it validates with,
 * which is the catalogue's (ClientMessages in clientMessages.ts; a test checks
 * that every registered schema matches it). What the message means is written
 * once, in protocol/describe.ts, not here.
 */
export interface MessageDef<S extends z.ZodType = z.ZodType, C = any> {
  type: string;
  schema: S;
  /** @deprecated the catalogue's text in protocol/describe.ts is what docs/protocol.md shows */
  description?: string;
  /** `ctx`: what the gateway gives a handler (MessageContext, realtime/features/api.ts) */
  handle(ctx: C, msg: z.infer<S>): void | Promise<void>;
}

export type ParseOutcome<C> =
  | { ok: true; def: MessageDef<z.ZodType, C>; msg: unknown }
  | { ok: false; code: Extract<ErrorCode, 'bad_json' | 'bad_message' | 'unknown_type' | 'invalid_message'>; message: string; ref?: string };

/** The inbound message types, by `type`. */
export class MessageRegistry<C> {
  private readonly defs = new Map<string, MessageDef<z.ZodType, C>>();

  register(...defs: MessageDef<any, C>[]): this {
    for (const def of defs) {
      if (this.defs.has(def.type)) throw new Error(`message type ${def.type} registered twice`);
      this.defs.set(def.type, def as MessageDef<z.ZodType, C>);
    }
    return this;
  }

  all(): MessageDef<z.ZodType, C>[] {
    return [...this.defs.values()];
  }

  /** Parses a text frame into a registered, valid message, or says precisely what is wrong. */
  parse(text: string): ParseOutcome<C> {
    let data: unknown;
    try {
      data = JSON.parse(text);
    } catch {
      return { ok: false, code: 'bad_json', message: 'frame is not JSON' };
    }
    if (typeof data !== 'object' || data === null || Array.isArray(data) || typeof (data as { type?: unknown }).type !== 'string') {
      return { ok: false, code: 'bad_message', message: 'a message is a JSON object with a string "type"' };
    }
    const type = (data as { type: string }).type;
    const def = this.defs.get(type);
    if (!def) return { ok: false, code: 'unknown_type', message: 'unknown message type', ref: type.slice(0, 64) };
    const parsed = def.schema.safeParse(data);
    if (!parsed.success) {
      const detail = parsed.error.issues
        .slice(0, 3)
        .map((i) => `${i.path.join('.') || '(message)'}: ${i.message}`)
        .join('; ');
      return { ok: false, code: 'invalid_message', message: detail, ref: type };
    }
    return { ok: true, def, msg: parsed.data };
  }
}
