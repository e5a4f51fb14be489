import { z } from 'zod';

/**
 * Every code of the `error` frame, with what it means, in one table: the
 * schema (ErrorMessage), the senders' type (ErrorCode) and docs/protocol.md
 * are made from it. An `error` refuses one frame; the connection stays open
 * (close codes are what ends it). `ref` names the refused message type.
 * test/realtime/protocolErrors.test.ts fails when a sender uses a code that is
 * not here.
 */
export const ERROR_CODES = {
  bad_json: 'the frame is not JSON',
  bad_message: 'the frame is not a JSON object with a string `type`',
  unknown_type: 'no message has this `type` (`ref`: the type, cut to 64 characters)',
  invalid_message: 'the message breaks its schema (`message`: the first three issues, `ref`: the type)',
  binary_not_supported: 'a binary frame: the protocol is JSON text',
  not_ready: 'a frame sent before `welcome`',
  rate_limited:
    'over the connection\'s message rate (at most one such error a second), or over the person\'s chat budget (`ref` `chat.send`); the frame was dropped',
  internal: 'the message could not be processed: a bug on our side',
  forbidden: 'a student sent a teacher action (`lead` included), or a teacher targeted someone they may not (a teacher cannot be muted)',
  board_only: 'a call or media message in a `board_only` lesson',
  not_found: 'the message names a participant who is not in this lesson, or the sender',
} as const satisfies Record<string, string>;

export type ErrorCode = keyof typeof ERROR_CODES;

export const ErrorMessage = z.object({
  type: z.literal('error'),
  code: z.enum(Object.keys(ERROR_CODES) as [ErrorCode, ...ErrorCode[]]),
  message: z.string(),
  /** the offending message type, when known */
  ref: z.string().optional(),
});

/** The one way to build an `error` frame: its type accepts only the table's codes. */
export const errorFrame = (code: ErrorCode, message: string, ref?: string): string =>
  JSON.stringify({ type: 'error', code, message, ...(ref ? { ref } : {}) });
