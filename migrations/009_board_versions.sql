-- Excalidraw's element versioning on the board (docs/board.md, "Sync model").
--
-- Every element write carries `version` (grows with each change) and
-- `version_nonce` (random per change, the lower wins a tie); the server applies
-- a write only when it is newer than what is stored. Tombstones keep the
-- version of their delete (their `data` is NULL, so the stamp needs columns):
-- a later version revives the element (undo of a delete, redo of an add).
ALTER TABLE board_elements
  ADD COLUMN version integer NOT NULL DEFAULT 1,
  ADD COLUMN version_nonce integer NOT NULL DEFAULT 0;

-- Elements written before this migration: version 1, nonce 0, in the element
-- JSON too (the snapshot lists them; adding fields is compatible, docs/snapshot-format.md).
UPDATE board_elements SET data = data || '{"version": 1, "version_nonce": 0}'::jsonb
WHERE data IS NOT NULL AND NOT data ? 'version';
