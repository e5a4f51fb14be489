import type { Db, Sql } from '../../db/index.js';
import type { FileInfo } from '../schema.js';
import type { CheckedImage } from './check.js';

export type { FileInfo };
import { FileError, megabytes } from './errors.js';

export interface FileQuota {
  maxBytes: number;
  maxFiles: number;
}

/**
 * Where a lesson's files live. One small interface, so that an object store
 * can take the bytes when a deployment outgrows one database
 * (docs/operations.md, "Files in an object store"): `put` is the only write,
 * and it is all or nothing.
 */
export interface FileStore {
  /**
   * Keeps a checked file in the lesson, or finds the same bytes already there
   * (`created: false`; the lesson's quota is not charged twice). Refuses with
   * FileError `archived`, `not_found` (no such lesson) or `lesson_full`.
   * Nothing of a refused or failed put remains.
   */
  put(lessonId: string, file: CheckedImage, uploadedBy: string, quota: FileQuota): Promise<{ info: FileInfo; created: boolean }>;
  /** The file's info and bytes, or undefined when the lesson has no such file. */
  get(lessonId: string, fileId: string): Promise<(FileInfo & { data: Buffer }) | undefined>;
  /** Whether the lesson has the file (answers a conditional request without the bytes). */
  info(lessonId: string, fileId: string): Promise<FileInfo | undefined>;
  /** Every file of a lesson, oldest first (the snapshot lists them). */
  list(db: Db, lessonId: string): Promise<FileInfo[]>;
}

export const FILE_ID = /^[0-9a-f]{64}$/;

/**
 * The files in Postgres (migrations/015_lesson_files.sql), bytes and index in
 * one row: durable with the lesson, backed up with it, and a put is one
 * transaction. The lesson's files are counted under a transaction-scoped
 * advisory lock of the lesson, so two uploads at once cannot both pass the
 * quota (the lesson row is not locked: link issuing reads it FOR SHARE).
 */
export class PgFileStore implements FileStore {
  constructor(
    private readonly sql: Sql,
    private readonly readSql: Sql = sql,
  ) {}

  async put(lessonId: string, file: CheckedImage, uploadedBy: string, quota: FileQuota): Promise<{ info: FileInfo; created: boolean }> {
    const info: FileInfo = { id: file.id, type: file.type, size: file.bytes.length, width: file.width, height: file.height };
    return this.sql.begin(async (tx) => {
      await tx`SELECT pg_advisory_xact_lock(hashtextextended(${'lesson_files:' + lessonId}, 0))`;
      const [lesson] = await tx<{ archived: boolean }[]>`SELECT archived_at IS NOT NULL AS archived FROM lessons WHERE id = ${lessonId}`;
      if (!lesson) throw new FileError('not_found', 'This lesson does not exist');
      if (lesson.archived) throw new FileError('archived', 'The lesson was deleted');
      const [have] = await tx<{ n: number; total: string; has: boolean }[]>`
        SELECT count(*)::int AS n, coalesce(sum(bytes), 0)::bigint AS total, bool_or(file_id = ${file.id}) AS has
        FROM lesson_files WHERE lesson_id = ${lessonId}`;
      if (have.has) return { info, created: false };
      if (have.n + 1 > quota.maxFiles) throw new FileError('lesson_full', `This lesson already holds ${quota.maxFiles} files`);
      if (Number(have.total) + info.size > quota.maxBytes) throw new FileError('lesson_full', `This lesson's files would pass ${megabytes(quota.maxBytes)}`);
      await tx`
        INSERT INTO lesson_files (lesson_id, file_id, type, bytes, width, height, data, uploaded_by)
        VALUES (${lessonId}, ${file.id}, ${file.type}, ${info.size}, ${file.width}, ${file.height}, ${file.bytes}, ${uploadedBy})`;
      return { info, created: true };
    });
  }

  async get(lessonId: string, fileId: string): Promise<(FileInfo & { data: Buffer }) | undefined> {
    if (!FILE_ID.test(fileId)) return undefined;
    const [row] = await this.sql<(FileInfo & { data: Buffer })[]>`
      SELECT file_id AS id, type, bytes AS size, width, height, data FROM lesson_files WHERE lesson_id = ${lessonId} AND file_id = ${fileId}`;
    return row;
  }

  async info(lessonId: string, fileId: string): Promise<FileInfo | undefined> {
    if (!FILE_ID.test(fileId)) return undefined;
    const [row] = await this.readSql<FileInfo[]>`
      SELECT file_id AS id, type, bytes AS size, width, height FROM lesson_files WHERE lesson_id = ${lessonId} AND file_id = ${fileId}`;
    return row;
  }

  async list(db: Db, lessonId: string): Promise<FileInfo[]> {
    return db<FileInfo[]>`
      SELECT file_id AS id, type, bytes AS size, width, height FROM lesson_files WHERE lesson_id = ${lessonId} ORDER BY created_at, file_id`;
  }
}
