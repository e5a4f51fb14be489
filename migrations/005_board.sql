-- The shared board of a lesson (docs/board.md).
--
-- Postgres is the authority for board content and its order: every batch of
-- operations commits in one transaction that holds the board row lock
-- (SELECT ... FOR UPDATE), so the per-lesson sequence number `seq` is assigned
-- in commit order no matter how many gateway nodes write to the same lesson.
-- An operation is acknowledged to its sender only after that commit.

CREATE TABLE boards (
  lesson_id        text PRIMARY KEY REFERENCES lessons(id),
  -- sequence number of the last applied operation (0: nothing applied yet)
  seq              bigint NOT NULL DEFAULT 0,
  -- ordered [{id, name}]; at most a few dozen pages, so one jsonb value
  pages            jsonb NOT NULL,
  pinned_page_id   text,
  -- live (not deleted) elements and the bytes of their JSON: board size limits
  live_elements    integer NOT NULL DEFAULT 0,
  live_bytes       bigint NOT NULL DEFAULT 0,
  -- seq of the first element ever added: the preview exists from then on
  first_content_seq bigint,
  updated_at       timestamptz NOT NULL DEFAULT now(),
  created_at       timestamptz NOT NULL DEFAULT now()
);

-- Materialised board content. A deleted element stays as a tombstone
-- (data NULL, deleted true) so that a late update cannot bring it back and a
-- reconnecting client can be told what was deleted since its last seq.
CREATE TABLE board_elements (
  lesson_id    text NOT NULL REFERENCES boards(lesson_id),
  element_id   text NOT NULL,
  page_id      text NOT NULL,
  -- stacking order within the page: fractional index, compared bytewise
  z            text COLLATE "C" NOT NULL,
  data         jsonb,
  bytes        integer NOT NULL DEFAULT 0,
  deleted      boolean NOT NULL DEFAULT false,
  -- seq of the operation that last changed this element (resync: "> since")
  updated_seq  bigint NOT NULL,
  PRIMARY KEY (lesson_id, element_id)
);
CREATE INDEX board_elements_page ON board_elements (lesson_id, page_id, z, element_id) WHERE NOT deleted;
CREATE INDEX board_elements_seq ON board_elements (lesson_id, updated_seq);

-- Cached preview PNG. `seq` is the board seq it shows; a preview older than
-- the board is rendered again on the next read (docs/board.md, "Preview").
CREATE TABLE board_previews (
  lesson_id    text PRIMARY KEY REFERENCES boards(lesson_id),
  seq          bigint NOT NULL,
  page_id      text NOT NULL,
  png          bytea NOT NULL,
  render_ms    integer NOT NULL,
  rendered_at  timestamptz NOT NULL
);
