-- Files of a lesson's board: images and PDF pages (docs/board.md, "Images and PDFs").
--
-- Content-addressed: `file_id` is the hex sha-256 of the stored bytes (what the
-- gateway kept after checking and re-encoding the upload), so a lesson holds one
-- copy of the same bytes however often they are uploaded. Image elements name
-- their file by this id. A file stays as long as the lesson's board does: a
-- deleted element is a tombstone that a later version can revive (undo), so no
-- file a board ever named is removed while the board exists.
--
-- `data` holds the bytes. The gateway reaches them only through its FileStore
-- interface (src/board/files/store.ts): an object store can take the bytes
-- (docs/operations.md, "Files in an object store"), leaving this table the
-- index, with `data` NULL.
CREATE TABLE lesson_files (
  lesson_id   text NOT NULL REFERENCES lessons(id),
  file_id     text NOT NULL CHECK (file_id ~ '^[0-9a-f]{64}$'),
  type        text NOT NULL CHECK (type IN ('image/png', 'image/jpeg', 'image/webp')),
  bytes       integer NOT NULL CHECK (bytes > 0),
  width       integer NOT NULL CHECK (width > 0),
  height      integer NOT NULL CHECK (height > 0),
  data        bytea,
  -- the public id of the person in the lesson who uploaded it first (never the partner's user id)
  uploaded_by text NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (lesson_id, file_id)
);
-- the bytes are fetched whole, never searched or compressed again (already compressed images)
ALTER TABLE lesson_files ALTER COLUMN data SET STORAGE EXTERNAL;
