import { useEffect, useRef, useState } from 'react';
import { CameraIcon, MicIcon } from '../ui/icons.js';
import { deviceOf, listDevices, openMedia, saveChoice, type CallChoice, type DeviceLists } from './devices.js';

/**
 * Before joining the call (docs/board.md, "Joining the call"): my camera's preview, camera and
 * microphone on or off, which camera, microphone and (where the browser allows) speaker. Nothing goes
 * to the others until "Join the call"; the board works meanwhile. A refused or missing device is said
 * in words, and the person joins without it (or with neither: they see and hear the others).
 */
export function PreJoin({ name, choice, onJoin }: { name: string; choice: CallChoice; onJoin: (stream: MediaStream | null, choice: CallChoice) => void }) {
  const [c, setC] = useState<CallChoice>(choice);
  const [stream, setStream] = useState<MediaStream | null>(null);
  const [problem, setProblem] = useState<string | null>(null);
  const [opening, setOpening] = useState(true);
  const [devices, setDevices] = useState<DeviceLists>({ cameras: [], mics: [], speakers: [] });
  /** asks for the devices again (a new choice, or Try again after allowing them) */
  const [attempt, setAttempt] = useState(0);
  const video = useRef<HTMLVideoElement>(null);
  /** the stream given to the call: not stopped when this goes */
  const handed = useRef<MediaStream | null>(null);
  const current = useRef<MediaStream | null>(null);

  const update = (patch: Partial<CallChoice>) =>
    setC((prev) => {
      const next = { ...prev, ...patch };
      saveChoice(next);
      return next;
    });

  useEffect(() => {
    let gone = false;
    setOpening(true);
    void openMedia(c).then(async ({ stream: s, problem: p }) => {
      if (gone) return void s?.getTracks().forEach((t) => t.stop());
      current.current?.getTracks().forEach((t) => t.stop());
      current.current = s;
      setStream(s);
      setProblem(p);
      setOpening(false);
      setDevices(await listDevices());
    });
    return () => {
      gone = true;
    };
    // the devices are opened again only when another one is chosen (on/off only enables tracks)
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [c.cameraId, c.micId, attempt]);

  // the preview shows what the others will see: nothing while the camera is off
  useEffect(() => {
    for (const t of stream?.getVideoTracks() ?? []) t.enabled = c.camera;
    for (const t of stream?.getAudioTracks() ?? []) t.enabled = c.mic;
    if (video.current && video.current.srcObject !== stream) video.current.srcObject = stream;
  }, [stream, c.camera, c.mic]);

  useEffect(
    () => () => {
      if (current.current !== handed.current) current.current?.getTracks().forEach((t) => t.stop());
    },
    [],
  );

  const hasCamera = !!stream?.getVideoTracks().length;
  const hasMic = !!stream?.getAudioTracks().length;
  const join = () => {
    const kept: CallChoice = { ...c, joined: true, cameraId: deviceOf(stream, 'video') ?? c.cameraId, micId: deviceOf(stream, 'audio') ?? c.micId };
    saveChoice(kept);
    handed.current = stream;
    onJoin(stream, { ...kept, camera: kept.camera && hasCamera, mic: kept.mic && hasMic });
  };

  const select = (label: string, list: MediaDeviceInfo[], value: string | null, set: (id: string) => void, testid: string) =>
    list.length > 0 && (
      <label className="prejoin-device">
        <span>{label}</span>
        <select value={value ?? list[0].deviceId} onChange={(e) => set(e.target.value)} data-testid={testid}>
          {list.map((d, i) => (
            <option key={d.deviceId} value={d.deviceId}>
              {d.label || `${label} ${i + 1}`}
            </option>
          ))}
        </select>
      </label>
    );

  return (
    <section className="video prejoin" aria-label="Join the call" data-testid="prejoin">
      <figure className="tile self prejoin-preview">
        <video ref={video} autoPlay playsInline muted data-testid="preview" />
        {(!hasCamera || !c.camera) && <div className="tile-off">{opening ? '…' : name.slice(0, 1).toUpperCase()}</div>}
        <figcaption>{opening ? 'Starting your camera…' : hasCamera && c.camera ? 'Your camera' : 'Camera off'}</figcaption>
      </figure>
      <div className="prejoin-side">
        {problem && (
          <p className="prejoin-problem" role="alert" data-testid="media-problem">
            {problem}{' '}
            <button type="button" className="link" onClick={() => setAttempt((n) => n + 1)}>
              Try again
            </button>
          </p>
        )}
        <div className="call-controls">
          <button type="button" className={c.mic && hasMic ? 'on' : 'off'} disabled={!hasMic} aria-pressed={c.mic && hasMic} onClick={() => update({ mic: !c.mic })} data-testid="prejoin-mic">
            <MicIcon /> {!hasMic ? 'No mic' : c.mic ? 'Mic on' : 'Mic off'}
          </button>
          <button type="button" className={c.camera && hasCamera ? 'on' : 'off'} disabled={!hasCamera} aria-pressed={c.camera && hasCamera} onClick={() => update({ camera: !c.camera })} data-testid="prejoin-camera">
            <CameraIcon /> {!hasCamera ? 'No camera' : c.camera ? 'Camera on' : 'Camera off'}
          </button>
        </div>
        {select('Camera', devices.cameras, deviceOf(stream, 'video') ?? c.cameraId, (id) => update({ cameraId: id }), 'choose-camera')}
        {select('Microphone', devices.mics, deviceOf(stream, 'audio') ?? c.micId, (id) => update({ micId: id }), 'choose-mic')}
        {select('Speaker', devices.speakers, c.speakerId, (id) => update({ speakerId: id }), 'choose-speaker')}
        <button type="button" className="primary prejoin-join" disabled={opening} onClick={join} data-testid="join-call">
          {hasCamera || hasMic ? 'Join the call' : 'Join without camera and microphone'}
        </button>
        <p className="prejoin-note">Nobody sees or hears you until you join. The board works meanwhile.</p>
      </div>
    </section>
  );
}
