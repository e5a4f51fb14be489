-- Foundation schema: partners, API keys, lessons, links, the money ledger,
-- metered sessions with their daily rollup, and the event outbox.
-- Every later migration builds on these tables; they are shared by the API,
-- the gateway, the dispatcher and the reports.

CREATE TABLE partners (
  id                 text PRIMARY KEY,
  name               text NOT NULL,
  plan               text NOT NULL CHECK (plan IN ('full', 'board_only')),
  -- the board rate default: mirrors DEFAULT_BOARD_RATE_PERCENT (src/domain/partners.ts)
  board_rate_percent integer NOT NULL DEFAULT 30 CHECK (board_rate_percent BETWEEN 0 AND 100),
  -- Keyed hash of partner-supplied user ids (HMAC-SHA256 with this key):
  -- the id itself is never stored, and the hash is scoped to the partner.
  user_hash_key      bytea NOT NULL,
  -- Denormalised balance: top-ups minus charges, changed only in the same
  -- transaction as the topups / usage_daily rows that explain it.
  balance_seconds    bigint NOT NULL DEFAULT 0,
  -- balance.low / balance.exhausted fire once per crossing: the charge that
  -- crosses the line disarms the flag, a top-up that lifts the balance back
  -- above the line re-arms it (docs/metering.md, "Balance events").
  balance_low_armed       boolean NOT NULL DEFAULT true,
  balance_exhausted_armed boolean NOT NULL DEFAULT true,
  suspended_at       timestamptz,
  created_at         timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE api_keys (
  id           text PRIMARY KEY,
  partner_id   text NOT NULL REFERENCES partners(id),
  -- sha256 of the whole key; keys carry >= 190 random bits, so a fast hash is enough.
  key_hash     bytea NOT NULL UNIQUE,
  created_at   timestamptz NOT NULL DEFAULT now(),
  revoked_at   timestamptz
);
CREATE INDEX api_keys_partner ON api_keys (partner_id);

CREATE TABLE lessons (
  id             text PRIMARY KEY,
  partner_id     text NOT NULL REFERENCES partners(id),
  external_id    text,
  title          text NOT NULL,
  mode           text NOT NULL CHECK (mode IN ('full', 'board_only')),
  subject_mode   text NOT NULL CHECK (subject_mode IN ('generic', 'math', 'physics')),
  created_at     timestamptz NOT NULL DEFAULT now(),
  started_at     timestamptz,
  ended_at       timestamptz,
  billed_seconds bigint NOT NULL DEFAULT 0,
  archived_at    timestamptz
);
-- external_id is unique among a partner's live lessons; archiving releases it
-- (docs/api-decisions.md). The database decides, so concurrent creates race safely.
CREATE UNIQUE INDEX lessons_partner_external_live
  ON lessons (partner_id, external_id) WHERE external_id IS NOT NULL AND archived_at IS NULL;
CREATE INDEX lessons_partner_external ON lessons (partner_id, external_id);
CREATE INDEX lessons_partner_created ON lessons (partner_id, created_at DESC, id DESC);

CREATE TABLE links (
  id          text PRIMARY KEY,
  lesson_id   text NOT NULL REFERENCES lessons(id),
  partner_id  text NOT NULL REFERENCES partners(id),
  token_hash  bytea NOT NULL UNIQUE,     -- sha256 of the token; the token is never stored
  user_hash   text NOT NULL,             -- keyed hash of user.id (see partners.user_hash_key)
  name        text NOT NULL,
  role        text NOT NULL CHECK (role IN ('teacher', 'student')),
  expires_at  timestamptz NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX links_lesson ON links (lesson_id);

-- Money in: every top-up with what was paid and what was received.
-- rub = 0 means free minutes (they lower the average price of a minute).
CREATE TABLE topups (
  id          bigserial PRIMARY KEY,
  partner_id  text NOT NULL REFERENCES partners(id),
  seconds     bigint NOT NULL CHECK (seconds > 0),
  rub         numeric(14, 2) NOT NULL DEFAULT 0 CHECK (rub >= 0),
  created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX topups_partner_created ON topups (partner_id, created_at);

-- One row per metered session of a lesson (a "call" in the calls report).
-- seconds is the cumulative metered time (>= 2 people present); it is only
-- ever raised to a new cumulative value (a watermark), which makes charging
-- idempotent: replaying "session S metered up to N seconds" charges nothing twice.
CREATE TABLE sessions (
  id               bigserial PRIMARY KEY,
  lesson_id        text NOT NULL REFERENCES lessons(id),
  partner_id       text NOT NULL REFERENCES partners(id),
  mode             text NOT NULL CHECK (mode IN ('full', 'board_only')),
  -- percent of a second deducted per metered second, fixed at session start
  rate_percent     integer NOT NULL CHECK (rate_percent BETWEEN 0 AND 100),
  started_at       timestamptz NOT NULL,
  ended_at         timestamptz,
  seconds          bigint NOT NULL DEFAULT 0,
  -- floor(seconds * rate_percent / 100): the cumulative floor keeps the fractional
  -- part exact across the session; the remainder (< 1 s) is never charged.
  charged_seconds  bigint NOT NULL DEFAULT 0,
  people_max       integer NOT NULL DEFAULT 0
);
-- at most one running session per lesson
CREATE UNIQUE INDEX sessions_one_running ON sessions (lesson_id) WHERE ended_at IS NULL;
CREATE INDEX sessions_partner_started ON sessions (partner_id, started_at DESC, id DESC);
CREATE INDEX sessions_lesson ON sessions (lesson_id, started_at DESC);

-- Daily rollup of metered time, days in Europe/Moscow. Each charge increments
-- the row of the Moscow day the metered seconds fell in (split at midnight to
-- the second), in the same transaction that moves sessions.seconds and
-- partners.balance_seconds. Sum over a lesson = lessons.billed_seconds;
-- sum over a partner = the balance decrease.
CREATE TABLE usage_daily (
  session_id       bigint NOT NULL REFERENCES sessions(id),
  day              date NOT NULL,
  partner_id       text NOT NULL REFERENCES partners(id),
  lesson_id        text NOT NULL REFERENCES lessons(id),
  mode             text NOT NULL,
  seconds          bigint NOT NULL DEFAULT 0,
  charged_seconds  bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (session_id, day)
);
CREATE INDEX usage_daily_partner_day ON usage_daily (partner_id, day, lesson_id);

-- The event outbox. Rows are written in the same transaction as the state change
-- they describe (src/events/outbox.ts); the webhook dispatcher delivers them.
-- id is the spec's event id: strictly increasing and never reused. The outbox
-- writer takes a per-partner transaction lock before taking an id, so a
-- partner's ids also commit in order and `GET /events?after=` never skips one.
CREATE TABLE events (
  id          bigserial PRIMARY KEY,
  partner_id  text NOT NULL REFERENCES partners(id),
  type        text NOT NULL,
  data        jsonb NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX events_partner_id ON events (partner_id, id);
