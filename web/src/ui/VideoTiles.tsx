import { useEffect, useRef } from 'react';
import type { Participant } from '../App.js';
import type { Call } from '../rtc/call.js';
import { CameraIcon, MicIcon } from './icons.js';

function Tile({ stream, name, muted, self, camera, state, speaker }: { stream: MediaStream | null; name: string; muted: boolean; self?: boolean; camera: boolean; state?: RTCPeerConnectionState; speaker?: string | null }) {
  const ref = useRef<HTMLVideoElement>(null);
  useEffect(() => {
    if (ref.current && ref.current.srcObject !== stream) ref.current.srcObject = stream;
  }, [stream]);
  // the others heard on the speaker chosen before joining (where the browser allows it: setSinkId)
  useEffect(() => {
    const v = ref.current as (HTMLVideoElement & { setSinkId?: (id: string) => Promise<void> }) | null;
    if (speaker && v?.setSinkId) v.setSinkId(speaker).catch(() => {});
  }, [speaker]);
  return (
    <figure className={`tile${self ? ' self' : ''}`} data-peer-state={state}>
      <video ref={ref} autoPlay playsInline muted={muted} />
      {(!stream || !camera) && <div className="tile-off">{name.slice(0, 1).toUpperCase()}</div>}
      <figcaption>{name}{self ? ' (you)' : ''}</figcaption>
    </figure>
  );
}

/**
 * Tiles for me and each person in the call, with my camera and microphone
 * toggles (mode `full` only). A person is heard and seen only while the
 * gateway reports their microphone/camera on: a page that ignored the
 * teacher's mute is still silent and dark here.
 */
export function VideoTiles({ call, me, participants, changed }: { call: Call; me: Participant; participants: Participant[]; changed: () => void }) {
  const byId = new Map(participants.map((p) => [p.id, p]));
  return (
    <section className="video" aria-label="Video call" data-testid="video">
      <div className="tiles">
        <Tile stream={call.local} name={me.name} muted self camera={call.camera} />
        {/* one tile per tab: a person on a laptop and a tablet shows twice */}
        {call.peers().map((p) => (
          <Tile key={p.key} stream={p.stream} name={byId.get(p.person)?.name ?? '…'} muted={!byId.get(p.person)?.mic} camera={!!byId.get(p.person)?.camera} state={p.state} speaker={call.speaker} />
        ))}
      </div>
      <div className="call-controls">
        <button
          className={call.mic ? 'on' : 'off'}
          disabled={!call.local || call.blocked.mic}
          title={call.blocked.mic ? 'The teacher turned your microphone off' : undefined}
          onClick={() => {
            call.setMic(!call.mic);
            changed();
          }}
          data-testid="toggle-mic"
        >
          <MicIcon /> {call.blocked.mic ? 'Mic off (teacher)' : call.mic ? 'Mic on' : 'Mic off'}
        </button>
        <button
          className={call.camera ? 'on' : 'off'}
          disabled={!call.local || call.blocked.camera}
          title={call.blocked.camera ? 'The teacher turned your camera off' : undefined}
          onClick={() => {
            call.setCamera(!call.camera);
            changed();
          }}
          data-testid="toggle-camera"
        >
          <CameraIcon /> {call.blocked.camera ? 'Camera off (teacher)' : call.camera ? 'Camera on' : 'Camera off'}
        </button>
      </div>
    </section>
  );
}
