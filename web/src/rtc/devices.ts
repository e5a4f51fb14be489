/**
 * Joining the call (docs/board.md, "Joining the call"): what a person chose before joining (camera and
 * microphone on or off, which devices, which speaker), kept for the tab in sessionStorage so a reload
 * joins again with the same, and the media opened for that choice.
 */
export interface CallChoice {
  /** joined the call in this tab: a reload joins again without asking */
  joined: boolean;
  camera: boolean;
  mic: boolean;
  cameraId: string | null;
  micId: string | null;
  /** the speaker (audio output) where the browser lets the page choose one */
  speakerId: string | null;
}

const KEY = 'call.choice';
const FRESH: CallChoice = { joined: false, camera: true, mic: true, cameraId: null, micId: null, speakerId: null };

/** The tab's choice (a fresh tab, or storage refused: not joined, both on, the browser's default devices). */
export function loadChoice(): CallChoice {
  try {
    const raw: unknown = JSON.parse(sessionStorage.getItem(KEY) ?? 'null');
    if (!raw || typeof raw !== 'object') return { ...FRESH };
    const r = raw as Record<string, unknown>;
    const id = (v: unknown) => (typeof v === 'string' && v ? v : null);
    return { joined: r.joined === true, camera: r.camera !== false, mic: r.mic !== false, cameraId: id(r.cameraId), micId: id(r.micId), speakerId: id(r.speakerId) };
  } catch {
    return { ...FRESH };
  }
}

export function saveChoice(c: CallChoice): void {
  try {
    sessionStorage.setItem(KEY, JSON.stringify(c));
  } catch {
    // not kept: a reload asks again
  }
}

/** Can the page choose where sound plays (Chromium's setSinkId; not Safari or Firefox by default)? */
export const canChooseSpeaker = () => typeof HTMLMediaElement !== 'undefined' && 'setSinkId' in HTMLMediaElement.prototype;

export interface Opened {
  stream: MediaStream | null;
  /** what went wrong, in words for the person (null: both devices open) */
  problem: string | null;
}

/**
 * Opens camera and microphone with the chosen devices (a device gone since falls back to the default:
 * `ideal`, not `exact`). One refused or missing does not cost the other: each is asked for alone then.
 */
export async function openMedia(c: Pick<CallChoice, 'cameraId' | 'micId'>): Promise<Opened> {
  if (!navigator.mediaDevices?.getUserMedia) return { stream: null, problem: 'This browser cannot use a camera or microphone here. You can still join to see and hear the others.' };
  const video: MediaTrackConstraints = { width: 640, height: 360, ...(c.cameraId ? { deviceId: { ideal: c.cameraId } } : {}) };
  const audio: MediaTrackConstraints | true = c.micId ? { deviceId: { ideal: c.micId } } : true;
  try {
    return { stream: await navigator.mediaDevices.getUserMedia({ video, audio }), problem: null };
  } catch (both) {
    const [v, a] = await Promise.all([
      navigator.mediaDevices.getUserMedia({ video }).then((s) => s, (e: unknown) => e),
      navigator.mediaDevices.getUserMedia({ audio }).then((s) => s, (e: unknown) => e),
    ]);
    const tracks = [v, a].filter((s): s is MediaStream => s instanceof MediaStream).flatMap((s) => s.getTracks());
    const stream = tracks.length ? new MediaStream(tracks) : null;
    return { stream, problem: problemText(v instanceof MediaStream ? null : v ?? both, a instanceof MediaStream ? null : a ?? both) };
  }
}

function problemText(camera: unknown, mic: unknown): string | null {
  const kind = (e: unknown) => (e instanceof DOMException || e instanceof Error ? e.name : e ? 'Error' : null);
  const cam = kind(camera);
  const mc = kind(mic);
  if (!cam && !mc) return null;
  const denied = (k: string | null) => k === 'NotAllowedError' || k === 'SecurityError';
  const missing = (k: string | null) => k === 'NotFoundError' || k === 'OverconstrainedError';
  const what = cam && mc ? 'camera and microphone' : cam ? 'camera' : 'microphone';
  const still = cam && mc ? 'You can still join to see and hear the others, and use the board and the chat.' : cam ? 'You can join with your microphone only.' : 'You can join with your camera only.';
  if (denied(cam) || denied(mc))
    return `The browser blocked your ${what} for this page. ${still} To use them, allow them in the address bar's site settings, then press Try again.`;
  if (missing(cam) && (missing(mc) || !mc)) return `No ${what.replace(' and ', ' or ')} was found. ${still}`;
  if (missing(mc) && !cam) return `No microphone was found. ${still}`;
  return `Your ${what} could not be started (another program may be using it). ${still}`;
}

export interface DeviceLists {
  cameras: MediaDeviceInfo[];
  mics: MediaDeviceInfo[];
  speakers: MediaDeviceInfo[];
}

/** The devices the person can choose from (named once the browser allowed the page a device). */
export async function listDevices(): Promise<DeviceLists> {
  const all = (await navigator.mediaDevices?.enumerateDevices?.().catch(() => [])) ?? [];
  const of = (kind: MediaDeviceKind) => all.filter((d) => d.kind === kind && d.deviceId);
  return { cameras: of('videoinput'), mics: of('audioinput'), speakers: canChooseSpeaker() ? of('audiooutput') : [] };
}

/** The device a track of the stream uses (what "default" turned out to be), for the choice kept. */
export const deviceOf = (stream: MediaStream | null, kind: 'video' | 'audio') => (kind === 'video' ? stream?.getVideoTracks() : stream?.getAudioTracks())?.[0]?.getSettings().deviceId ?? null;
