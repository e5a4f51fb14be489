import { useEffect, useRef } from 'react';
import type { Participant } from '../../../src/board/protocol.js';
import type { Call } from '../rtc/call.js';
import { CameraIcon, MicIcon } from './icons.js';

function Tile({ stream, name, muted, self, camera }: { stream: MediaStream | null; name: string; muted: boolean; self?: boolean; camera: boolean }) {
  const ref = useRef<HTMLVideoElement>(null);
  useEffect(() => {
    if (ref.current && ref.current.srcObject !== stream) ref.current.srcObject = stream;
  }, [stream]);
  return (
    <figure className={`tile${self ? ' self' : ''}`}>
      <video ref={ref} autoPlay playsInline muted={muted} />
      {(!stream || !camera) && <div className="tile-off">{name.slice(0, 1).toUpperCase()}</div>}
      <figcaption>{name}{self ? ' (you)' : ''}</figcaption>
    </figure>
  );
}

/** Tiles for me and each person in the call, with my camera and microphone toggles (mode `full` only). */
export function VideoTiles({ call, me, participants }: { call: Call; me: Participant; participants: Participant[] }) {
  const byId = new Map(participants.map((p) => [p.id, p]));
  return (
    <section className="video" aria-label="Video call" data-testid="video">
      <div className="tiles">
        <Tile stream={call.local} name={me.name} muted self camera={call.camera} />
        {call.peers().map((p) => (
          <Tile key={p.id} stream={p.stream} name={byId.get(p.id)?.name ?? '…'} muted={false} camera={byId.get(p.id)?.camera ?? true} />
        ))}
      </div>
      <div className="call-controls">
        <button className={call.mic ? 'on' : 'off'} disabled={!call.local} onClick={() => call.setMic(!call.mic)} data-testid="toggle-mic">
          <MicIcon /> {call.mic ? 'Mic on' : 'Mic off'}
        </button>
        <button className={call.camera ? 'on' : 'off'} disabled={!call.local} onClick={() => call.setCamera(!call.camera)} data-testid="toggle-camera">
          <CameraIcon /> {call.camera ? 'Camera on' : 'Camera off'}
        </button>
      </div>
    </section>
  );
}
