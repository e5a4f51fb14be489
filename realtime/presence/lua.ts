import { METERED_PEOPLE } from '../../src/metering/rules.js';

/**
 * Lua scripts that decide presence and the meter of a lesson atomically in
 * Redis. They implement the state machine of ./MeterMachine.ts, function for
 * function (InMemoryPresence runs the TypeScript one; the shared suite
 * test/realtime/presenceSuite.ts proves they agree):
 *
 *   meter hash (METER_FIELDS)             MeterState (parseMeterValues)
 *   sid = '', start_at = ''            -> idle
 *   sid = '', start_at set             -> starting (since set: metering, '' : paused)
 *   sid set,  since set                -> running
 *   sid set,  since = ''               -> paused
 *   end_sid set                        -> pendingEnd (beside any state)
 *
 *   Lua                 TypeScript (MeterMachine.ts)   transitions returned
 *   on_count            onCount                        occupied, ended, start, resume, pause, empty
 *   start_run           startRun                       start | resume
 *   pause               pause                          (pause)
 *   pend_end            pendEnd                        (ended)
 *   TICK's settle       settle                         pause, empty, start, resume; start (retry)
 *   SET_SESSION         bindSession                    -
 *   CLAIM_END           claimIdleEnd                   -
 *   ARCHIVE_END         archive                        -
 *   CLEAR_END           clearEnd                       -
 *   ORPHAN              claimOrphan                    -
 *   LEAVE, conn gone    lostDeparture                  -
 *   maybe_forget        forgettable                    -
 *
 * The rules they repeat come from src/metering/rules.ts: METERED_PEOPLE is
 * generated into the script below; the idle end, the participant.joined
 * window and the rebuild window arrive as ARGV.
 *
 * KEYS[1] is the script's only declared key, `<root><tag>` (ioredis adds
 * REDIS_KEY_PREFIX to it): the namespace root and a hash tag. Every other key is
 * derived from it inside the script, in the same hash slot, so each call touches
 * one slot and runs on one Redis Cluster master (RedisPresence picks the tag):
 *
 * - a lesson's scripts: the tag of the lesson's slot (redis.ts slotTag, `{<t>}`
 *   with CRC16(t) = CRC16(lesson)), so `l:{<lesson>}:*`, the slot's epoch and
 *   the node sets of the slot are one slot; on a single Redis the tag is ''
 *   and the keys are those of one Redis (the `{<lesson>}` braces are just characters).
 * - the node scripts (HEARTBEAT, REAP_CLAIM, REAP_DONE, DUES, LEAVE_NODE): `{nodes}`
 *   on a cluster, '' on a single Redis.
 *
 *   <root>l:{<lesson>}:c   HASH  conn -> "<node> <person>"
 *   <root>l:{<lesson>}:p   HASH  person -> number of connections
 *   <root>l:{<lesson>}:i   HASH  person -> public JSON {id,name,role}
 *   <root>l:{<lesson>}:m   HASH  the meter (fields in METER_FIELDS)
 *   <root>l:{<lesson>}:j   HASH  person -> ms of the last participant.joined (a filter; Postgres decides)
 *   <root>l:{<lesson>}:g   STRING latest departure reported while rebuilding, before the lesson had a meter again
 *   <root>l:{<lesson>}:s   HASH  node -> how far it vouched, at its last tick, for its sockets' presence here (ms)
 *   <root>n:<node><tag>    SET   "<lesson> <conn>" of that node in the lessons of the slot
 *   <root>epoch<tag>       STRING when this Redis state (of the slot) began (ms): set by the first script that
 *                          finds none (a new or restarted Redis, a master that lost its data); for rebuild_ms
 *                          after it nothing decides a lesson is empty
 *   <root>nodes<ntag>      ZSET  node id -> lease expiry (ms)
 *   <root>due<ntag>        HASH  node -> when its next lease renewal is due (ms): a dead node's departures are dated then
 *   <root>reaping<ntag>    HASH  node -> "<at>|<claimed>": a reap of that node in progress (its departures dated at)
 *   <root>ns:<node><ntag>  SET   the slot tags of the node's connections (a cluster only: where REAP_SLOT looks)
 *
 * Times are milliseconds of the calling node's clock (deps.clock), passed in
 * ARGV so that tests can drive them with a ManualClock.
 */
export const METER_FIELDS = [
  'seq', // hybrid clock: max(seq + 1, now); orders snapshots and presence events
  'sid', // running session id ('' none yet)
  'acc', // metered ms of the session before `since`
  'since', // metering runs since (>= 2 people present), '' when paused
  'paused_at', // when metering last paused
  'empty', // nobody present since, '' while someone is
  'pmax', // most people at once in this session
  'start_at', // a session start is pending (the run began then, no sid yet)
  'start_claim', // when a node last took the pending start
  'end_sid', // a session end is pending: which session
  'end_cum', // its final metered seconds
  'end_charge_at', // when those seconds were reached
  'end_at', // its ended_at
  'flush_at', // last periodic flush claimed
  'seeded_at', // the meter was rebuilt from Postgres then ('' otherwise)
  'gone', // latest departure, reported while rebuilding, of a connection Redis had lost ('' none)
  'run_from', // the last RUNS_KEPT runs pauses ended, their starts comma-separated, oldest first ('' none since the session began) ...
  'run_to', // ... and their ends (kept through resumes: a deletion noticed late takes back what they ran past archived_at)
] as const;

/**
 * The most ended runs a meter keeps (run_from/run_to) for a late deletion's cut (cut_after). A
 * deletion whose notice was missed is found by the next flush (seconds later), so more
 * pause-resume cycles than this in between is someone flapping on purpose; the excess of the
 * older ones is then billed.
 */
export const RUNS_KEPT = 8;

const LIB = `
local root, tag = string.match(KEYS[1], '^(.-)(%b{})$')
if not root then root = KEYS[1]; tag = '' end
local FIELDS = {${METER_FIELDS.map((f) => `'${f}'`).join(',')}}
local function K(l, s) return root .. 'l:{' .. l .. '}:' .. s end
local function NS(node) return root .. 'n:' .. node .. tag end
local function G(name) return root .. name .. tag end
local function N(v) if v == nil or v == false or v == '' then return nil end return tonumber(v) end
local function F(n) if n == nil then return '' end return string.format('%d', n) end

local function split(s, sep)
  local out = {}
  local start = 1
  while true do
    local i = string.find(s, sep, start, true)
    if not i then out[#out + 1] = string.sub(s, start); break end
    out[#out + 1] = string.sub(s, start, i - 1)
    start = i + #sep
  end
  return out
end

local function load_meter(l)
  local raw = redis.call('HGETALL', K(l, 'm'))
  if #raw == 0 then return nil end
  local m = {}
  for _, f in ipairs(FIELDS) do m[f] = '' end
  for i = 1, #raw, 2 do m[raw[i]] = raw[i + 1] end
  return m
end

local function save_meter(l, m)
  local args = {}
  for _, f in ipairs(FIELDS) do args[#args + 1] = f; args[#args + 1] = m[f] end
  redis.call('HSET', K(l, 'm'), unpack(args))
  -- the departures remembered before this meter existed are in it now
  if m.adopt_g then redis.call('DEL', K(l, 'g')) end
end

-- seed: "seq|sid|acc|since|empty|confirmed" from Postgres (src/metering/meters.ts readMeterSeed)
local function seed_meter(l, seed, now)
  local p = split(seed, '|')
  local m = {}
  for _, f in ipairs(FIELDS) do m[f] = '' end
  m.seq = F(math.max(N(p[1]) or 0, now))
  m.sid = p[2]; m.acc = (p[3] ~= '' and p[3]) or '0'; m.since = p[4]; m.empty = p[5]
  m.pmax = '0'
  -- only a running session has anything to reconcile with the re-registered sockets (settle)
  m.seeded_at = (m.sid ~= '' and F(now)) or ''
  m.confirmed = p[6]
  -- departures the nodes reported while Redis was rebuilding, before this meter existed
  m.gone = redis.call('GET', K(l, 'g')) or ''
  m.adopt_g = m.gone ~= ''
  return m
end

local function bump(m, now) m.seq = F(math.max((N(m.seq) or 0) + 1, now)) end

-- rules.ts METERED_PEOPLE (the two-person rule)
local METERED = ${METERED_PEOPLE}
-- RUNS_KEPT (above)
local RUNS_KEPT = ${RUNS_KEPT}

-- When this Redis state began; a script that finds none starts it (rules.ts rebuildMs).
-- On a cluster each slot has its own (a master that lost its data lost its slots' epochs):
-- a script that starts one says so ('!epoch' at the end of its reply, R), and
-- RedisPresence then starts every missing one at the same time (initEpochs), as
-- the first script does for the whole of a single Redis.
local EPOCH_NEW = false
local function epoch(now)
  local e = N(redis.call('GET', G('epoch')))
  if not e then redis.call('SET', G('epoch'), F(now)); e = now; EPOCH_NEW = true end
  return e
end
local function R(t)
  if EPOCH_NEW and tag ~= '' then t[#t + 1] = '!epoch' end
  return t
end

-- The meter as one reply string, its values in FIELDS order joined by '|' (every value is a
-- number, '' or, in run_from/run_to, numbers joined by ','): one bulk string per meter instead of an array of 16, which both sides of every
-- flush, arrival and departure built and parsed value by value (RedisPresence parseMeter).
local function meter_out(m)
  local out = {}
  for i, f in ipairs(FIELDS) do out[i] = m[f] end
  return table.concat(out, '|')
end

-- pendEnd: the session's final figures are frozen and the lesson is free for a new session.
local function pend_end(m, end_at)
  m.end_sid = m.sid
  m.end_cum = F(math.floor((N(m.acc) or 0) / 1000))
  m.end_charge_at = (m.since == '' and m.paused_at ~= '' and m.paused_at) or F(end_at)
  m.end_at = F(end_at)
  m.sid = ''; m.acc = '0'; m.since = ''; m.paused_at = ''; m.pmax = '0'
  m.start_at = ''; m.start_claim = ''; m.run_from = ''; m.run_to = ''
end

-- pause: running -> paused (a pending start stays pending, unmetered)
local function pause(m, at)
  local since = N(m.since)
  if since then
    m.acc = F((N(m.acc) or 0) + math.max(0, at - since))
    m.since = ''
    m.paused_at = F(math.max(at, since))
    local fs = (m.run_from ~= '' and split(m.run_from, ',')) or {}
    local ts = (m.run_to ~= '' and split(m.run_to, ',')) or {}
    fs[#fs + 1] = F(since); ts[#ts + 1] = m.paused_at
    while #fs > RUNS_KEPT do table.remove(fs, 1); table.remove(ts, 1) end
    m.run_from = table.concat(fs, ','); m.run_to = table.concat(ts, ',')
  end
end

-- cutAfter: a deletion at \`at\` noticed after pauses that ended runs past it (the notice was
-- missed): those runs' time past \`at\` comes off. True if anything did.
local function cut_after(m, at)
  if m.run_from == '' or m.run_to == '' then return false end
  local fs, ts = split(m.run_from, ','), split(m.run_to, ',')
  local past = 0
  for i = 1, math.min(#fs, #ts) do
    local from, to = N(fs[i]), N(ts[i])
    if from and to and to > at then past = past + (to - math.max(from, at)) end
  end
  if past == 0 then return false end
  m.acc = F(math.max(0, (N(m.acc) or 0) - past))
  m.run_from = ''; m.run_to = ''
  if m.since == '' and N(m.paused_at) and N(m.paused_at) > at then m.paused_at = F(at) end
  return true
end

-- startRun: idle -> starting ('start'); paused -> running, starting stays ('resume')
local function start_run(m, at)
  m.since = F(at)
  if m.sid == '' and m.start_at == '' then
    m.start_at = F(at); m.start_claim = F(at); m.acc = '0'; m.paused_at = ''; m.pmax = '0'; m.run_from = ''; m.run_to = ''
    return 'start'
  end
  m.paused_at = ''
  return 'resume'
end

-- onCount: the rules applied when the number of distinct people present goes
-- from before to after, dated at (a departure may be dated at its last sign of life).
local function on_count(m, before, after, at, now, idle)
  local fx = {}
  if before == 0 and after > 0 then
    -- the idle wait is over even if no sweeper has ended the session yet
    if m.sid ~= '' and m.empty ~= '' and now - N(m.empty) >= idle and m.end_sid == '' then
      pend_end(m, N(m.empty)); fx[#fx + 1] = 'ended'
    end
    if m.empty ~= '' then m.empty = ''; fx[#fx + 1] = 'occupied' end
  end
  if before < METERED and after >= METERED and m.since == '' then fx[#fx + 1] = start_run(m, at) end
  if after > (N(m.pmax) or 0) and (m.sid ~= '' or m.start_at ~= '') then m.pmax = F(after) end
  if before >= METERED and after < METERED and m.since ~= '' then pause(m, at); fx[#fx + 1] = 'pause' end
  if after == 0 and before > 0 then m.empty = F(at); fx[#fx + 1] = 'empty' end
  if #fx > 0 then bump(m, now) end
  return fx
end

-- Removes one connection; returns person, whether it was their last connection, and their info.
local function drop_conn(l, conn)
  local v = redis.call('HGET', K(l, 'c'), conn)
  if not v then return nil end
  local parts = split(v, ' ')
  local node, person = parts[1], parts[2]
  redis.call('HDEL', K(l, 'c'), conn)
  redis.call('SREM', NS(node), l .. ' ' .. conn)
  local info = redis.call('HGET', K(l, 'i'), person) or ''
  local n = redis.call('HINCRBY', K(l, 'p'), person, -1)
  local last = 0
  if n <= 0 then
    redis.call('HDEL', K(l, 'p'), person)
    redis.call('HDEL', K(l, 'i'), person)
    last = 1
  end
  return { person, last, info, node }
end

-- Whether a node other than \`node\` has a connection in the lesson: only then must a presence event
-- decided here cross the bus (a node whose arrival registers later gets the people in its welcome).
local function others(l, node)
  local mine = node .. ' '
  for _, v in ipairs(redis.call('HVALS', K(l, 'c'))) do
    if string.sub(v, 1, #mine) ~= mine then return 1 end
  end
  return 0
end

-- Nothing left to remember about an empty lesson without a session.
local function maybe_forget(l, m, count)
  if count == 0 and m.sid == '' and m.start_at == '' and m.end_sid == '' then
    redis.call('DEL', K(l, 'c'), K(l, 'p'), K(l, 'i'), K(l, 'm'), K(l, 's'))
    return true
  end
  return false
end
`;

/**
 * join: ARGV now, idle_ms, node, conn, person, info_json, joined_window_ms, seed, rejoin, lesson
 * -> {'seed'} | {'ok', first, announce, count, meter, fx[...], people[...], others}
 */
export const JOIN = `${LIB}
local l = ARGV[10]
local now, idle = tonumber(ARGV[1]), tonumber(ARGV[2])
local node, conn, person, info = ARGV[3], ARGV[4], ARGV[5], ARGV[6]
local window, seed, rejoin = tonumber(ARGV[7]), ARGV[8], ARGV[9]
epoch(now)
local m = load_meter(l)
if not m then
  if seed == '' then return R({ 'seed' }) end
  m = seed_meter(l, seed, now)
end
local first, announce, fx = 0, 0, {}
if redis.call('HEXISTS', K(l, 'c'), conn) == 0 then
  local before = redis.call('HLEN', K(l, 'p'))
  redis.call('HSET', K(l, 'c'), conn, node .. ' ' .. person)
  redis.call('SADD', NS(node), l .. ' ' .. conn)
  local n = redis.call('HINCRBY', K(l, 'p'), person, 1)
  redis.call('HSET', K(l, 'i'), person, info)
  local after = redis.call('HLEN', K(l, 'p'))
  fx = on_count(m, before, after, now, now, idle)
  if n == 1 then
    first = 1
    if #fx == 0 then bump(m, now) end
  end
  -- any arrival, not only a first connection: a person moving off a draining node is still
  -- present there for a moment, and that node may have had the filter forget them (forget_joined)
  if rejoin ~= '1' then
    local last = N(redis.call('HGET', K(l, 'j'), person))
    if not last or now - last >= window then
      redis.call('HSET', K(l, 'j'), person, F(now))
      redis.call('PEXPIRE', K(l, 'j'), window + 3600000)
      announce = 1
    end
  end
end
save_meter(l, m)
return R({ 'ok', first, announce, redis.call('HLEN', K(l, 'p')), meter_out(m), fx, redis.call('HVALS', K(l, 'i')), others(l, node) })
`;

/**
 * leave: ARGV now, idle_ms, conn, lesson, at (the departure's date: the socket's last sign of life), rebuild_ms
 * -> {'gone'} | {'ok', last, info, count, meter, fx[...], others (another node has connections left in the lesson)}
 */
export const LEAVE = `${LIB}
local now, idle, conn, l = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3], ARGV[4]
local at = math.min(now, tonumber(ARGV[5]) or now)
local rebuild_until = epoch(now) + tonumber(ARGV[6])
local before = redis.call('HLEN', K(l, 'p'))
local d = drop_conn(l, conn)
if not d then
  -- lostDeparture: Redis lost this connection (it is rebuilding): remember when
  -- its person left, so the settle pauses the rebuilt meter then, not at the seed.
  if now < rebuild_until then
    local m = load_meter(l)
    if m then
      if m.seeded_at ~= '' then m.gone = F(math.max(N(m.gone) or at, at)); save_meter(l, m) end
    else
      redis.call('SET', K(l, 'g'), F(math.max(N(redis.call('GET', K(l, 'g'))) or at, at)), 'PX', 600000)
    end
  end
  return R({ 'gone' })
end
local after = redis.call('HLEN', K(l, 'p'))
local m = load_meter(l)
if not m then return R({ 'ok', d[2], d[3], after, '', {}, others(l, d[4]) }) end
local fx = on_count(m, before, after, at, now, idle)
if d[2] == 1 and #fx == 0 then bump(m, now) end
local out = meter_out(m)
local o = others(l, d[4])
if not maybe_forget(l, m, after) then save_meter(l, m) end
return R({ 'ok', d[2], d[3], after, out, fx, o })
`;

/**
 * heartbeat: ARGV now, node, lease_ms, renew_ms, stale_ms
 * -> {alive (0: our lease was gone: Redis lost it or another node reaped us), expired nodes...}
 *  | {-1} a reap of this node is in progress: wait, then re-register (not before: it would remove them)
 *  | {-2} a reap of this node was left unfinished (its reaper is gone): finish it, then re-register
 * Expired: nodes whose lease ran out, and nodes whose reap was left unfinished for stale_ms.
 */
export const HEARTBEAT = `${LIB}
local now, node, lease, renew, stale = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
epoch(now)
local mark = redis.call('HGET', G('reaping'), node)
if mark then
  if now - tonumber(split(mark, '|')[2]) < stale then return R({ -1 }) end
  return R({ -2 })
end
local had = redis.call('ZSCORE', G('nodes'), node)
redis.call('ZADD', G('nodes'), now + lease, node)
redis.call('HSET', G('due'), node, F(now + renew))
local out = { had and 1 or 0 }
for _, n in ipairs(redis.call('ZRANGEBYSCORE', G('nodes'), '-inf', now)) do
  if n ~= node then out[#out + 1] = n end
end
local marks = redis.call('HGETALL', G('reaping'))
for i = 1, #marks, 2 do
  if now - tonumber(split(marks[i + 1], '|')[2]) >= stale then out[#out + 1] = marks[i] end
end
return R(out)
`;

/**
 * reap_claim: ARGV now, dead_node, stale_ms -> {} | {at, slot tags...}
 * The first step of reaping a node whose lease expired, once: the lease is
 * re-checked here, so a node that came back in time is left alone and two
 * reapers cannot both apply the same departures. The lease goes and a mark
 * `reaping` says when its departures are dated (when the dead node's next
 * renewal was due, rules.ts renewMs) until REAP_DONE; a mark older than
 * stale_ms (its reaper died) is claimed again. Then REAP_SLOT runs in each slot
 * the node had connections in (a cluster; '' on one Redis), and REAP_DONE.
 */
export const REAP_CLAIM = `${LIB}
local now, dead, stale = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3])
local score = N(redis.call('ZSCORE', G('nodes'), dead))
local at
if score then
  if score > now then return {} end
  -- The dead node was alive at its last renewal and would have renewed again
  -- when that was due: its people left by then (never later, so a reap that
  -- comes late does not bill the downtime; never earlier, so nobody is under-billed).
  at = math.min(now, score, N(redis.call('HGET', G('due'), dead)) or score)
  redis.call('ZREM', G('nodes'), dead)
  redis.call('HDEL', G('due'), dead)
else
  local mark = redis.call('HGET', G('reaping'), dead)
  if not mark then return {} end
  local p = split(mark, '|')
  if now - tonumber(p[2]) < stale then return {} end
  at = tonumber(p[1])
end
redis.call('HSET', G('reaping'), dead, F(at) .. '|' .. F(now))
local out = redis.call('SMEMBERS', root .. 'ns:' .. dead .. tag)
table.insert(out, 1, F(at))
return out
`;

/** reap_done: ARGV dead_node -> 1: the reap of REAP_CLAIM is over. */
export const REAP_DONE = `${LIB}
redis.call('HDEL', G('reaping'), ARGV[1])
redis.call('DEL', root .. 'ns:' .. ARGV[1] .. tag)
return 1
`;

/** ns_add: ARGV node, slot tag -> 1: the node has connections in that slot (a cluster only). */
export const NS_ADD = `${LIB}
redis.call('SADD', root .. 'ns:' .. ARGV[1] .. tag, ARGV[2])
return 1
`;

/**
 * dues: -> {node, due, ...}: when each node's next renewal is due, and for a
 * node being reaped, when its departures are dated. TICK takes them as ARGV
 * (they live in the nodes' slot, the lessons in theirs); read just before, they
 * can only be earlier than in the TICK's instant: its safe_until only smaller.
 */
export const DUES = `${LIB}
local out = redis.call('HGETALL', G('due'))
local marks = redis.call('HGETALL', G('reaping'))
for i = 1, #marks, 2 do out[#out + 1] = marks[i]; out[#out + 1] = split(marks[i + 1], '|')[1] end
return out
`;

/**
 * reap_slot: ARGV now, idle_ms, dead_node, at -> {{lesson, count, meter or '', fx[...], left infos[...]}, ...}
 * Removes every connection of the dead node in the lessons of this slot, dated
 * at (REAP_CLAIM's).
 */
export const REAP_SLOT = `${LIB}
local now, idle, dead, at = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4])
local byLesson, order = {}, {}
for _, member in ipairs(redis.call('SMEMBERS', NS(dead))) do
  local parts = split(member, ' ')
  local l = parts[1]
  if not byLesson[l] then byLesson[l] = {}; order[#order + 1] = l end
  table.insert(byLesson[l], parts[2])
end
redis.call('DEL', NS(dead))
local out = {}
for _, l in ipairs(order) do
  local before = redis.call('HLEN', K(l, 'p'))
  local left = {}
  for _, conn in ipairs(byLesson[l]) do
    local d = drop_conn(l, conn)
    if d and d[2] == 1 then left[#left + 1] = d[3] end
  end
  local after = redis.call('HLEN', K(l, 'p'))
  local m = load_meter(l)
  if m then
    local fx = on_count(m, before, after, at, now, idle)
    if #left > 0 and #fx == 0 then bump(m, now) end
    local mo = meter_out(m)
    if not maybe_forget(l, m, after) then save_meter(l, m) end
    out[#out + 1] = { l, after, mo, fx, left }
  else
    out[#out + 1] = { l, after, '', {}, left }
  end
end
return out
`;

/**
 * tick: ARGV now, idle_ms, flush_ms, grace_ms, start_retry_ms, rebuild_ms, node, n, then n pairs node, due (DUES),
 * then per lesson: lesson, until (every lesson of the call in the slot of KEYS[1])
 * -> per lesson {lesson, 'seed'} | {lesson, 'ok', due, count, meter, fx[...], safe_until}
 * Periodic work of a node for the lessons it serves: records how far the node
 * vouches for its sockets there (until; '' none), retries a pending start,
 * settles a meter rebuilt from Postgres once every node had time to
 * re-register, and claims the periodic flush (one node per interval).
 */
export const TICK = `${LIB}
local now, idle, flush, grace, retry = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local rebuild_until = epoch(now) + tonumber(ARGV[6])
local node = ARGV[7]
local dues, nd = {}, tonumber(ARGV[8])
for j = 1, nd do dues[ARGV[7 + 2 * j]] = N(ARGV[8 + 2 * j]) end
local out = {}
for i = 9 + 2 * nd, #ARGV, 2 do
  local l = ARGV[i]
  local m = load_meter(l)
  if not m then
    out[#out + 1] = { l, 'seed' }
  else
    if node ~= '' and ARGV[i + 1] ~= '' then redis.call('HSET', K(l, 's'), node, ARGV[i + 1]) end
    local fx, changed = {}, false
    local count = redis.call('HLEN', K(l, 'p'))
    local seeded = N(m.seeded_at)
    if seeded and now >= math.max(seeded + grace, rebuild_until) then
      changed = true
      -- settle: re-registration is over: what Postgres remembered and what the
      -- live connections say are reconciled, dated when Redis was seeded.
      -- (at the latest departure reported for a connection Redis had lost, if earlier)
      local stop = math.min(seeded, N(m.gone) or seeded)
      m.seeded_at = ''; m.gone = ''
      if count < METERED and m.since ~= '' then pause(m, stop); fx[#fx + 1] = 'pause' end
      if count == 0 and m.empty == '' then m.empty = F(stop); fx[#fx + 1] = 'empty' end
      if count >= METERED and m.since == '' then fx[#fx + 1] = start_run(m, now) end
    end
    if m.sid == '' and m.start_at ~= '' and now - (N(m.start_claim) or 0) >= retry then
      m.start_claim = F(now); fx[#fx + 1] = 'start'; changed = true
    end
    local due = 0
    if m.flush_at == '' or now - N(m.flush_at) >= flush - 250 then m.flush_at = F(now); due = 1 end
    if #fx > 0 then bump(m, now) end
    -- most ticks only claim the flush: one field written, not the whole meter
    if changed then save_meter(l, m) elseif due == 1 then redis.call('HSET', K(l, 'm'), 'flush_at', m.flush_at) end
    -- Presence is certain only up to when the next renewal of every node with
    -- people here is due (a node that died since is reaped dated then) and up
    -- to how far each vouched for its sockets (a half-open socket's departure
    -- is dated at its last sign of life + one keepalive cycle): a flush must
    -- not charge past either (a watermark cannot be taken back).
    local safe, seen = now, {}
    if due == 1 then
      for _, v in ipairs(redis.call('HVALS', K(l, 'c'))) do
        local n = split(v, ' ')[1]
        if not seen[n] then
          seen[n] = true
          local d = dues[n]
          if d and d < safe then safe = d end
          local s = N(redis.call('HGET', K(l, 's'), n))
          if s and s < safe then safe = s end
        end
      end
    end
    out[#out + 1] = { l, 'ok', due, count, meter_out(m), fx, F(safe) }
  end
end
return R(out)
`;

/**
 * set_session: ARGV now, lesson, sid, start_at, base_ms
 * A node created (or adopted) the session for the pending start `start_at`.
 * base_ms: seconds the adopted session already had, so the watermark goes on from there.
 */
export const SET_SESSION = `${LIB}
local now, l, sid, start_at, base = tonumber(ARGV[1]), ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5])
local m = load_meter(l)
if not m then return { 'gone' } end
if m.sid == '' and m.start_at == start_at and m.end_sid == '' then
  m.sid = sid
  m.acc = F((N(m.acc) or 0) + base)
  m.start_at = ''; m.start_claim = ''
  bump(m, now)
  save_meter(l, m)
  return { 'ok', redis.call('HLEN', K(l, 'p')), meter_out(m) }
end
return { 'stale', redis.call('HLEN', K(l, 'p')), meter_out(m) }
`;

/**
 * forget_joined: ARGV lesson, person, at -> 1 | 0
 * A participant.joined the node could not record before it stopped (Postgres
 * away): the filter's entry goes if it is still that arrival's (`at`), so the
 * person's next arrival, on any node, is announced; Postgres decides the rule.
 */
export const FORGET_JOINED = `${LIB}
local l, person, at = ARGV[1], ARGV[2], ARGV[3]
if redis.call('HGET', K(l, 'j'), person) ~= at then return 0 end
redis.call('HDEL', K(l, 'j'), person)
return 1
`;

/**
 * claim_end: ARGV now, idle_ms, lesson, sid, seed, rebuild_ms
 * -> {'seed'} | {'end', meter} | {'busy'} | {'orphan'}
 * The idle sweeper asks whether session `sid` is over. Only Redis knows who
 * is present right now, so Postgres' empty_since is confirmed here first;
 * while a new Redis state is being rebuilt from the live nodes, nobody is
 * known to be absent: busy.
 */
export const CLAIM_END = `${LIB}
local now, idle, l, sid, seed = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3], ARGV[4], ARGV[5]
local rebuild_until = epoch(now) + tonumber(ARGV[6])
local m = load_meter(l)
if not m then
  if seed == '' then return R({ 'seed' }) end
  m = seed_meter(l, seed, now)
end
local count = redis.call('HLEN', K(l, 'p'))
if m.end_sid == sid then return R({ 'end', meter_out(m) }) end
if now < rebuild_until then return R({ 'busy' }) end
if m.sid == sid then
  if count == 0 and m.empty ~= '' and now - N(m.empty) >= idle then
    pend_end(m, N(m.empty))
    bump(m, now)
    save_meter(l, m)
    return R({ 'end', meter_out(m) })
  end
  return R({ 'busy' })
end
if count == 0 then return R({ 'orphan' }) end
return R({ 'busy' })
`;

/**
 * archive_end: ARGV now, lesson, archived_at, seed -> {'seed'} | {'end', meter} | {'starting', meter} | {'none'}
 * The lesson was deleted: metering stops at archived_at and the session ends then.
 * A start pending since before archived_at stays pending, paused at archived_at
 * ('starting': its time is billed once the session is made); a later one is dropped.
 */
export const ARCHIVE_END = `${LIB}
local now, l, at, seed = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3]), ARGV[4]
local m = load_meter(l)
if not m then
  if seed == '' then return { 'seed' } end
  m = seed_meter(l, seed, now)
end
if m.end_sid ~= '' then return { 'end', meter_out(m) } end
if m.sid == '' then
  if m.start_at ~= '' and N(m.start_at) < at then
    local changed = cut_after(m, at)
    if m.since ~= '' then pause(m, at); changed = true end
    if changed then bump(m, now); save_meter(l, m) end
    return { 'starting', meter_out(m) }
  end
  m.start_at = ''; m.start_claim = ''; m.since = ''; m.acc = '0'; m.paused_at = ''; m.run_from = ''; m.run_to = ''
  save_meter(l, m)
  return { 'none' }
end
cut_after(m, at)
pause(m, at)
if N(m.paused_at) and N(m.paused_at) > at then m.paused_at = F(at) end
pend_end(m, at)
bump(m, now)
save_meter(l, m)
return { 'end', meter_out(m) }
`;

/**
 * clear_end: ARGV now, lesson, sid -> {'ok'|'stale', meter or ''}
 * The pending end of `sid` is done in Postgres.
 */
export const CLEAR_END = `${LIB}
local now, l, sid = tonumber(ARGV[1]), ARGV[2], ARGV[3]
local m = load_meter(l)
if not m then return { 'gone', '' } end
if m.end_sid ~= sid then return { 'stale', meter_out(m) } end
m.end_sid = ''; m.end_cum = ''; m.end_charge_at = ''; m.end_at = ''
bump(m, now)
local out = meter_out(m)
if not maybe_forget(l, m, redis.call('HLEN', K(l, 'p'))) then save_meter(l, m) end
return { 'ok', out }
`;

/**
 * orphan: ARGV now, lesson, sid, seed, rebuild_ms -> {'seed'} | {'busy'} | {'ok', meter}
 * Postgres has a running session nobody vouched for lately. If nobody is
 * present, the meter stops when presence was last confirmed (the seed's
 * confirmed time) and the lesson counts as empty since then. Never while a
 * new Redis state is being rebuilt from the live nodes (rules.ts rebuildMs):
 * the gateways' sockets are the truth, and they have not all re-registered.
 */
export const ORPHAN = `${LIB}
local now, l, sid, seed = tonumber(ARGV[1]), ARGV[2], ARGV[3], ARGV[4]
local rebuild_until = epoch(now) + tonumber(ARGV[5])
local m = load_meter(l)
if not m then
  if seed == '' then return R({ 'seed' }) end
  m = seed_meter(l, seed, now)
end
local count = redis.call('HLEN', K(l, 'p'))
if count > 0 or m.sid ~= sid or now < rebuild_until then return R({ 'busy' }) end
local at = N(m.confirmed) or N(m.seeded_at) or now
-- a departure reported while rebuilding is a later sign of presence than the last heartbeat
if N(m.gone) and N(m.gone) > at then at = N(m.gone) end
if m.since ~= '' then pause(m, at) end
if m.empty == '' then m.empty = F(at) end
m.seeded_at = ''; m.gone = ''
bump(m, now)
save_meter(l, m)
return R({ 'ok', meter_out(m) })
`;

/** people: ARGV lesson -> {count, seq, infos...} */
export const PEOPLE = `${LIB}
local l = ARGV[1]
local m = load_meter(l)
return { redis.call('HLEN', K(l, 'p')), (m and m.seq) or '0', redis.call('HVALS', K(l, 'i')) }
`;

/** leave_node: ARGV node -> removes the node's lease (graceful shutdown, after its connections left). */
export const LEAVE_NODE = `${LIB}
redis.call('ZREM', G('nodes'), ARGV[1])
redis.call('HDEL', G('due'), ARGV[1])
redis.call('DEL', root .. 'ns:' .. ARGV[1] .. tag)
return 1
`;
