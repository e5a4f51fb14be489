import type { ClientMessage } from '../../../realtime/protocol/clientMessages.js';
import type { ServerMessage } from '../../../realtime/protocol/serverMessages.js';
/**
 * The video call of a `full` lesson: a mesh of RTCPeerConnections, one per
 * other participant's *connection* (a person with the lesson open on a laptop
 * and a tablet takes part twice), signalled through the gateway (rtc.hello /
 * rtc.offer / rtc.answer / rtc.ice / rtc.bye, docs/protocol.md "Video
 * call"). A tab that joins says hello to everyone; each connection that hears
 * it offers, so on a join only one side offers. A lesson has a tutor and a
 * few students; a mesh is the simplest thing that works at that size
 * (docs/board.md, "Video call").
 *
 * Recovery: a connection that fails, stays disconnected or is closed is
 * replaced by a new one, offered again with a growing delay (1, 2, 4 ... 15 s)
 * until it connects or the peer's tab is gone. Both sides may offer at once
 * (both noticed the failure); the connection with the smaller call id keeps
 * its offer and the other answers it (WebRTC's "perfect negotiation").
 */
export interface Peer {
  /** the peer connection's call id (one tab) */
  key: string;
  /** its person id */
  person: string;
  stream: MediaStream | null;
  state: RTCPeerConnectionState;
}

/** The signals this tab sends, as the protocol catalogue types them. */
type Signal = Extract<ClientMessage, { type: 'rtc.hello' | 'rtc.offer' | 'rtc.answer' | 'rtc.ice' }>;

interface Entry {
  pc: RTCPeerConnection;
  peer: Peer;
  queued: RTCIceCandidateInit[];
  /** re-offers since it was last connected */
  attempts: number;
  retry?: ReturnType<typeof setTimeout>;
}

/** How long a connection may stay `disconnected` (a network blip) before it is replaced. */
const DISCONNECTED_GRACE_MS = 2000;
const RETRY_MAX_MS = 15_000;
/** How often closed connections are looked for (closing one fires no event on its own side). */
const WATCH_MS = 1000;

export class Call {
  local: MediaStream | null = null;
  camera = false;
  mic = false;
  /** turned off by the teacher: cannot be turned on until they allow it (the gateway keeps it off for everyone anyway) */
  blocked = { camera: false, mic: false };
  /** my connection's call id (welcome.call_id); changes when the socket reconnects */
  conn = '';
  private pcs = new Map<string, Entry>();
  /** candidates that arrived before their connection exists (the offer is still waiting for my media) */
  private early = new Map<string, RTCIceCandidateInit[]>();
  private watch: ReturnType<typeof setInterval> | undefined;

  constructor(
    private readonly me: string,
    private iceServers: RTCIceServer[],
    private readonly send: (m: Signal) => void,
    private readonly changed: () => void,
  ) {}

  /**
   * Fresh ICE servers (TURN credentials expire: the gateway sends new ones while I am in the lesson):
   * new connections use them, open ones take them for their next ICE restart, and a relayed
   * connection that fails when its old credentials expire is replaced with them (recover).
   */
  setIceServers(servers: RTCIceServer[]): void {
    this.iceServers = servers;
    for (const { pc } of this.pcs.values()) {
      try {
        pc.setConfiguration({ ...pc.getConfiguration(), iceServers: servers });
      } catch {
        // a closed connection refuses a new configuration: nothing to renew
      }
    }
  }

  /** where the others are heard (an audio output's id, where the browser lets the page choose; null: the default) */
  speaker: string | null = null;

  /**
   * Joins with the media opened before (the camera preview's, web/src/rtc/PreJoin.tsx): camera and
   * microphone on as chosen; no media at all (refused, none found, "join without"): receive-only.
   */
  start(stream: MediaStream | null, on: { camera: boolean; mic: boolean }): void {
    this.local = stream;
    this.setCamera(on.camera);
    this.setMic(on.mic);
    this.watch ??= setInterval(() => this.lookForClosed(), WATCH_MS);
  }

  peers(): Peer[] {
    return [...this.pcs.values()].map((p) => p.peer);
  }

  /** Is this signal for my tab? (Signals reach all of my person's tabs; `to_conn` names one.) */
  mine(msg: Extract<ServerMessage, { type: `rtc.${string}` }>): boolean {
    return !('to_conn' in msg) || msg.to_conn === undefined || msg.to_conn === this.conn;
  }

  /** A person is in the lesson and I have no call with any of their tabs: ask each tab to call me. */
  peerPresent(person: string): void {
    if (person === this.me || this.peers().some((p) => p.person === person)) return;
    this.send({ type: 'rtc.hello', to: person });
  }

  /** A tab of `person` joined (or rejoined) the call: I offer it a new connection. */
  async onHello(person: string, conn: string): Promise<void> {
    this.drop(conn);
    await this.offer(person, conn);
  }

  /** The person left the lesson: all their tabs' connections go. */
  peerLeft(person: string): void {
    for (const p of this.peers()) if (p.person === person) this.drop(p.key);
  }

  /** One tab closed (the person may still be here in another one): its tile goes. */
  onBye(conn: string): void {
    this.drop(conn);
  }

  /** Forget every connection (the socket reconnected: I say hello again with my new call id). */
  reset(): void {
    for (const key of [...this.pcs.keys()]) this.drop(key);
  }

  /** The teacher's blocks (from the gateway): a blocked kind is turned off now. */
  block(b: { camera: boolean; mic: boolean }): void {
    this.blocked = { ...b };
    if (b.camera && this.camera) this.setCamera(false);
    if (b.mic && this.mic) this.setMic(false);
  }

  setCamera(on: boolean): void {
    this.camera = on && !this.blocked.camera && !!this.local?.getVideoTracks().length;
    for (const t of this.local?.getVideoTracks() ?? []) t.enabled = this.camera;
    this.changed();
  }

  setMic(on: boolean): void {
    this.mic = on && !this.blocked.mic && !!this.local?.getAudioTracks().length;
    for (const t of this.local?.getAudioTracks() ?? []) t.enabled = this.mic;
    this.changed();
  }

  async onOffer(person: string, conn: string, sdp: string): Promise<void> {
    const mine = this.pcs.get(conn);
    // both offered at once: the smaller call id's offer wins, the other side answers it
    if (mine?.pc.signalingState === 'have-local-offer' && this.conn < conn) return;
    const attempts = mine?.attempts ?? 0;
    this.drop(conn);
    const entry = this.connection(person, conn);
    entry.attempts = attempts;
    await entry.pc.setRemoteDescription({ type: 'offer', sdp });
    await this.drain(entry);
    const answer = await entry.pc.createAnswer();
    await entry.pc.setLocalDescription(answer);
    this.send({ type: 'rtc.answer', to: person, to_conn: conn, sdp: answer.sdp ?? '' });
  }

  async onAnswer(conn: string, sdp: string): Promise<void> {
    const entry = this.pcs.get(conn);
    if (!entry || entry.pc.signalingState !== 'have-local-offer') return;
    await entry.pc.setRemoteDescription({ type: 'answer', sdp });
    await this.drain(entry);
  }

  async onIce(conn: string, candidate: RTCIceCandidateInit): Promise<void> {
    const entry = this.pcs.get(conn);
    if (!entry) {
      this.early.set(conn, [...(this.early.get(conn) ?? []), candidate].slice(-50));
      return;
    }
    if (!entry.pc.remoteDescription) entry.queued.push(candidate);
    else await entry.pc.addIceCandidate(candidate).catch(() => {});
  }

  stop(): void {
    if (this.watch) clearInterval(this.watch);
    this.watch = undefined;
    this.reset();
    for (const t of this.local?.getTracks() ?? []) t.stop();
  }

  private drop(key: string): void {
    const entry = this.pcs.get(key);
    this.early.delete(key);
    if (!entry) return;
    clearTimeout(entry.retry);
    this.pcs.delete(key);
    entry.pc.close();
    this.changed();
  }

  private async drain(entry: Entry): Promise<void> {
    for (const c of entry.queued.splice(0)) await entry.pc.addIceCandidate(c).catch(() => {});
  }

  private connection(person: string, key: string): Entry {
    const pc = new RTCPeerConnection({ iceServers: this.iceServers });
    const peer: Peer = { key, person, stream: null, state: 'new' };
    const entry: Entry = { pc, peer, queued: this.early.get(key) ?? [], attempts: 0 };
    this.early.delete(key);
    this.pcs.set(key, entry);
    if (this.local) for (const t of this.local.getTracks()) pc.addTrack(t, this.local);
    else {
      pc.addTransceiver('video', { direction: 'recvonly' });
      pc.addTransceiver('audio', { direction: 'recvonly' });
    }
    pc.onicecandidate = (e) => {
      const c = e.candidate;
      if (c) this.send({ type: 'rtc.ice', to: person, to_conn: key, candidate: { candidate: c.candidate, sdpMid: c.sdpMid, sdpMLineIndex: c.sdpMLineIndex } });
    };
    pc.ontrack = (e) => {
      peer.stream = e.streams[0] ?? new MediaStream([e.track]);
      this.changed();
    };
    pc.onconnectionstatechange = () => {
      if (this.pcs.get(key) !== entry) return;
      peer.state = pc.connectionState;
      if (pc.connectionState === 'connected') {
        entry.attempts = 0;
        clearTimeout(entry.retry);
        entry.retry = undefined;
      } else if (pc.connectionState === 'failed') this.recover(entry, 0);
      else if (pc.connectionState === 'disconnected') this.recover(entry, DISCONNECTED_GRACE_MS);
      this.changed();
    };
    this.changed();
    return entry;
  }

  /** Replaces a broken connection with a new offer after `after` ms plus the backoff of earlier tries. */
  private recover(entry: Entry, after: number): void {
    clearTimeout(entry.retry);
    const wait = after + Math.min(RETRY_MAX_MS, entry.attempts === 0 ? 0 : 1000 * 2 ** (entry.attempts - 1));
    entry.retry = setTimeout(() => {
      if (this.pcs.get(entry.peer.key) !== entry || entry.pc.connectionState === 'connected') return;
      const { person, key } = entry.peer;
      const attempts = entry.attempts + 1;
      this.drop(key);
      void this.offer(person, key).then((e) => {
        if (e) {
          e.attempts = attempts;
          // no answer at all (the tab is gone without a bye reaching us): try again later
          this.recover(e, RETRY_MAX_MS);
        }
      });
    }, wait);
  }

  /** A connection closed on this side (by the browser, or by hand) fires no event: look for them. */
  private lookForClosed(): void {
    for (const entry of this.pcs.values()) {
      if (entry.pc.connectionState === 'closed' && !entry.retry) this.recover(entry, 0);
    }
  }

  private async offer(person: string, key: string): Promise<Entry | undefined> {
    if (this.pcs.has(key)) return undefined;
    const entry = this.connection(person, key);
    const offer = await entry.pc.createOffer();
    await entry.pc.setLocalDescription(offer);
    this.send({ type: 'rtc.offer', to: person, to_conn: key, sdp: offer.sdp ?? '' });
    return entry;
  }
}
