import { SnapshotSchema, type FileInfo, type Snapshot } from '../../board/schema.js';
import { toSnapshot, type BoardRead } from '../../board/store.js';

/** The snapshot document (docs/snapshot-format.md) is already our own public format: built, not passed through. */
export const BoardSnapshotSchema = SnapshotSchema;

export function presentSnapshot(lessonId: string, read: BoardRead, files: FileInfo[]): Snapshot {
  return toSnapshot(lessonId, read, files);
}
