/**
 * Why a file was refused, with the HTTP status the gateway answers and a
 * sentence the page shows as it is ("This image is larger than 10 MB").
 */
export const FILE_ERRORS = {
  unauthorized: 401, // no link, an unknown or expired one
  forbidden: 403, // a link of another lesson
  removed: 403, // the person was removed from the lesson
  not_found: 404, // no such file in this lesson
  archived: 410, // the lesson was deleted
  too_large: 413, // the upload is larger than FILE_MAX_BYTES
  unsupported_type: 415, // not PNG, JPEG, WebP or GIF (SVG, HTML, PDF, anything else)
  type_mismatch: 415, // the Content-Type names another image type than the bytes are
  too_many_pixels: 422, // more than FILE_MAX_PIXELS, read from the header
  invalid_image: 422, // does not decode whole
  lesson_full: 409, // the lesson's files would pass FILE_LESSON_MAX_BYTES or FILE_LESSON_MAX_FILES
  rate_limited: 429, // more than FILE_UPLOADS_PER_MINUTE uploads of this person
  unavailable: 503, // Postgres, or the node is too busy to check the image in time
} as const;
export type FileErrorCode = keyof typeof FILE_ERRORS;

export class FileError extends Error {
  readonly status: number;
  constructor(
    readonly code: FileErrorCode,
    message: string,
    readonly retryAfterS?: number,
  ) {
    super(message);
    this.status = FILE_ERRORS[code];
  }
}

/** "10 MB" */
export const megabytes = (n: number): string => `${Math.round((n / (1024 * 1024)) * 10) / 10} MB`;
