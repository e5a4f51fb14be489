/**
 * Limits of the participant protocol that the page needs as values. This
 * module imports nothing, so the page can use them without bundling the zod
 * schemas of the catalogue.
 */

/** characters of one chat line, after trimming */
export const CHAT_MAX_CHARS = 2000;
/** An SDP blob is a few KB; 64 KB leaves room for many codecs and candidates. */
export const SDP_MAX = 64 * 1024;
/** points of one `board.stroke` delta */
export const STROKE_DELTA_MAX_POINTS = 500;
