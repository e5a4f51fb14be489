-- usage_daily_partner_day (001) served the first usage report, which grouped
-- usage_daily per request. The reports now read the usage_lesson_daily and
-- calls_daily rollups (004), and nothing queries usage_daily by partner and
-- day any more (bench/reports: 15 scans over its runs, none from a request,
-- against every charge's write to it; 140 MB for a year of 11 partners).
-- Every charge upserts usage_daily, so the index was a write cost only.
DROP INDEX IF EXISTS usage_daily_partner_day;
