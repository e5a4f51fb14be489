/**
 * Error frames of the lesson features. They have the gateway's `error` shape
 * (docs/protocol.md) with codes of their own (docs/protocol.md, "Errors"):
 * the connection stays open; `ref` names the refused message type.
 */
export type FeatureErrorCode =
  /** a student sent a teacher action, or a teacher targeted someone they may not */
  | 'forbidden'
  /** call signalling or media messages in a `board_only` lesson */
  | 'board_only'
  /** the message names a participant id that cannot exist in this lesson */
  | 'not_found'
  /** too many chat messages */
  | 'rate_limited';

export const featureError = (code: FeatureErrorCode, message: string, ref: string): string => JSON.stringify({ type: 'error', code, message, ref });
