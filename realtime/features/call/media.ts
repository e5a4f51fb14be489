import type { Redis } from '../../../src/redis.js';
import type { MediaState } from '../../protocol/serverMessages.js';

/** Media state of a lesson outlives its sockets this long (a lesson plus its reconnects). */
const TTL_MS = 12 * 3600_000;

/**
 * One script for every change, so a teacher's mute and a student's own
 * `media.state` cannot interleave: hash `media:{<lesson>}`, fields per person
 * `c:`/`m:` (camera/mic on), `bc:`/`bm:` (blocked by the teacher), `v:`
 * (version, grows with every change), `r:` (role, from the person's own
 * messages). ARGV: op, person, camera, mic, ttl, role.
 *   set:     the person's own state; a blocked kind stays off
 *   block:   the teacher turns the named kinds off and blocks them (never a teacher's: returns 'teacher')
 *   unblock: the teacher lifts the named blocks (the kinds stay off until the person turns them on)
 *   left:    the person left: both off, blocks kept (a mute survives a reconnect)
 */
const LUA = `
local h, p, op = KEYS[1], ARGV[2], ARGV[1]
if op == 'block' and redis.call('HGET', h, 'r:' .. p) == 'teacher' then return 'teacher' end
if op == 'set' then redis.call('HSET', h, 'r:' .. p, ARGV[6]) end
local cam, mic = ARGV[3] == '1', ARGV[4] == '1'
local bc = redis.call('HGET', h, 'bc:' .. p) == '1'
local bm = redis.call('HGET', h, 'bm:' .. p) == '1'
local c = redis.call('HGET', h, 'c:' .. p) == '1'
local m = redis.call('HGET', h, 'm:' .. p) == '1'
if op == 'set' then
  c = cam and not bc
  m = mic and not bm
elseif op == 'block' then
  if cam then bc = true; c = false end
  if mic then bm = true; m = false end
elseif op == 'unblock' then
  if cam then bc = false end
  if mic then bm = false end
elseif op == 'left' then
  c = false; m = false
end
local b = function(x) if x then return '1' else return '0' end end
local v = redis.call('HINCRBY', h, 'v:' .. p, 1)
redis.call('HSET', h, 'c:' .. p, b(c), 'm:' .. p, b(m), 'bc:' .. p, b(bc), 'bm:' .. p, b(bm))
redis.call('PEXPIRE', h, ARGV[5])
return {b(c), b(m), b(bc), b(bm), v}
`;

type Op = 'set' | 'block' | 'unblock' | 'left';
type RedisWithMedia = Redis & {
  lessonMedia(key: string, op: Op, person: string, camera: string, mic: string, ttl: number, role: string): Promise<[string, string, string, string, number] | 'teacher'>;
};

/**
 * Camera and microphone state of the people of each lesson, in Redis (fast
 * shared state, every node sees it; not durable, and nothing depends on it
 * beyond the call's display and the teacher's blocks).
 */
export class MediaStates {
  private readonly redis: RedisWithMedia;

  constructor(redis: Redis) {
    this.redis = redis as unknown as RedisWithMedia;
    if (typeof this.redis.lessonMedia !== 'function') redis.defineCommand('lessonMedia', { numberOfKeys: 1, lua: LUA });
  }

  private async run(lessonId: string, op: Op, personId: string, what: { camera: boolean; mic: boolean }, role = ''): Promise<MediaState | 'teacher'> {
    const r = await this.redis.lessonMedia(`media:{${lessonId}}`, op, personId, what.camera ? '1' : '0', what.mic ? '1' : '0', TTL_MS, role);
    if (r === 'teacher') return r;
    const [c, m, bc, bm, v] = r;
    return { camera: c === '1', mic: m === '1', camera_blocked: bc === '1', mic_blocked: bm === '1', v: Number(v) };
  }

  set(lessonId: string, person: { id: string; role: string }, want: { camera: boolean; mic: boolean }): Promise<MediaState> {
    return this.run(lessonId, 'set', person.id, want, person.role) as Promise<MediaState>;
  }

  /** 'teacher' when the person is a teacher (their own media.state said so): teachers are never blocked. */
  block(lessonId: string, personId: string, what: { camera: boolean; mic: boolean }): Promise<MediaState | 'teacher'> {
    return this.run(lessonId, 'block', personId, what);
  }

  unblock(lessonId: string, personId: string, what: { camera: boolean; mic: boolean }): Promise<MediaState> {
    return this.run(lessonId, 'unblock', personId, what) as Promise<MediaState>;
  }

  left(lessonId: string, personId: string): Promise<MediaState> {
    return this.run(lessonId, 'left', personId, { camera: false, mic: false }) as Promise<MediaState>;
  }

  /** Everyone's state in the lesson, by person id. */
  async all(lessonId: string): Promise<Record<string, MediaState>> {
    const h = await this.redis.hgetall(`media:{${lessonId}}`);
    const out: Record<string, MediaState> = {};
    for (const [field, value] of Object.entries(h)) {
      const colon = field.indexOf(':');
      const kind = field.slice(0, colon);
      const id = field.slice(colon + 1);
      const s = (out[id] ??= { camera: false, mic: false, camera_blocked: false, mic_blocked: false, v: 0 });
      if (kind === 'c') s.camera = value === '1';
      else if (kind === 'm') s.mic = value === '1';
      else if (kind === 'bc') s.camera_blocked = value === '1';
      else if (kind === 'bm') s.mic_blocked = value === '1';
      else if (kind === 'v') s.v = Number(value);
    }
    return out;
  }
}

export const mediaStateFrame = (personId: string, s: MediaState) => JSON.stringify({ type: 'media.state', participant_id: personId, ...s });
