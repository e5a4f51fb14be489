/**
 * WebSocket close codes of the gateway. Application codes mirror the HTTP
 * status of the same meaning (4000 + status), so a client that knows HTTP
 * knows what to do: 44xx means "do not retry as is", 45xx "retry later".
 * docs/protocol.md lists them with the client's expected reaction.
 */
export const CloseCode = {
  /** the server is shutting down or restarting: reconnect (to another node) */
  goingAway: 1001,
  /** the node is draining before a restart (SIGTERM): reconnect at once, the proxy sends you to another node */
  restarting: 1012,
  /** protocol misuse the connection cannot recover from (repeated invalid frames) */
  badRequest: 4400,
  /** the link stopped being valid */
  unauthorized: 4401,
  /** removed from the lesson (reserved for teacher actions, board phase) */
  forbidden: 4403,
  /** another socket of the same person opened past GATEWAY_MAX_SOCKETS_PER_PERSON: this one, the oldest, is closed */
  replaced: 4409,
  /** the lesson was deleted */
  archived: 4410,
  /** a frame larger than GATEWAY_MAX_PAYLOAD_BYTES */
  payloadTooLarge: 4413,
  /** more messages than GATEWAY_MESSAGES_PER_SECOND allows, for too long */
  rateLimited: 4429,
  /** a bug on our side */
  internal: 4500,
  /** presence (Redis) or the database could not be reached while joining: retry with backoff */
  unavailable: 4503,
} as const;

export type CloseCodeName = keyof typeof CloseCode;

/** Reasons sent with the codes (at most 123 bytes by the WebSocket spec). */
export const CloseReason: Record<CloseCodeName, string> = {
  goingAway: 'server restarting',
  restarting: 'node draining: reconnect now',
  badRequest: 'too many invalid frames',
  unauthorized: 'link no longer valid',
  forbidden: 'removed from the lesson',
  replaced: 'too many connections of this person; a newer one replaced it',
  archived: 'lesson deleted',
  payloadTooLarge: 'frame too large',
  rateLimited: 'too many messages',
  internal: 'internal error',
  unavailable: 'temporarily unavailable',
};
