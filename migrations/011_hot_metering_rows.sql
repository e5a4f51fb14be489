-- The rows every running lesson updates at each periodic flush (every
-- GATEWAY_METER_FLUSH_SECONDS): its session (seconds, charged_seconds), its
-- lesson (billed_seconds), its day of usage (seconds, charged_seconds) and its
-- meter snapshot. None of those columns is indexed, so each update can stay on
-- its page (a HOT update: no new index entries, and the page prunes its own dead
-- versions) if the page has room. Full pages made most of them non-HOT: in a
-- load test of 4,167 running lessons, 25 % of the sessions' updates were HOT, so
-- the rest wrote an entry in each of the five indexes of sessions
-- (docs/benchmarks.md, issue 16, 2026-11-27 forenoon). Free room on each page,
-- and eager vacuum for what still goes non-HOT.
--
-- A fill factor applies to pages written from now on. No rewrite is needed: the
-- rows updated every flush are mostly those of sessions and days started since,
-- and an older row's page gets room once vacuum clears it (docs/operations.md).
ALTER TABLE sessions SET (fillfactor = 70, autovacuum_vacuum_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.05);
ALTER TABLE lessons SET (fillfactor = 70, autovacuum_vacuum_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.05);
ALTER TABLE usage_daily SET (fillfactor = 70, autovacuum_vacuum_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.05);
ALTER TABLE lesson_meters SET (fillfactor = 70, autovacuum_vacuum_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.05);
