/**
 * Why a board operation was refused. These travel to the sender over the
 * socket (docs/protocol.md, `board.reject`), not over HTTP, so they are
 * not AppErrors; the gateway sends them as they are.
 */
export const BOARD_ERROR_CODES = [
  'invalid', // fails the operation schema, or breaks a board rule (e.g. deleting the last page)
  'forbidden', // a teacher-only operation sent by a student, or a student touching a locked element
  'pinned', // a student acting outside the pinned page while a page is pinned
  'conflict', // a page id that exists already (element writes never conflict: the newer version wins)
  'not_found', // a page that does not exist
  'too_large', // one element over its byte limit
  'board_full', // the board's element, byte or page limit would be exceeded
  'archived', // the lesson was deleted
  'unavailable', // the operation could not be stored (Postgres); nothing was applied
  'rate_limited', // the person sent more board operations than their budget (across their sockets); nothing was applied
] as const;
export type BoardErrorCode = (typeof BOARD_ERROR_CODES)[number];

export class BoardOpError extends Error {
  constructor(
    readonly code: BoardErrorCode,
    message: string,
  ) {
    super(message);
  }
}

export const boardError = (code: BoardErrorCode, message: string) => new BoardOpError(code, message);
