/**
 * The video call of a `full` lesson: a mesh of RTCPeerConnections, one per
 * other participant, signalled through the gateway (rtc.offer / rtc.answer /
 * rtc.ice, relayed only within the lesson). Of each pair, the participant
 * with the smaller id makes the offer, so both sides agree without a round of
 * negotiation. A lesson has a tutor and a few students; a mesh is the simplest
 * thing that works at that size (docs/board.md, "Video call").
 */
export interface Peer {
  id: string;
  stream: MediaStream | null;
  state: RTCPeerConnectionState;
}

type Signal =
  | { type: 'rtc.offer'; to: string; sdp: string }
  | { type: 'rtc.answer'; to: string; sdp: string }
  | { type: 'rtc.ice'; to: string; candidate: RTCIceCandidateInit };

export class Call {
  local: MediaStream | null = null;
  camera = false;
  mic = false;
  /** turned off by the teacher: cannot be turned on until they allow it (the gateway keeps it off for everyone anyway) */
  blocked = { camera: false, mic: false };
  private pcs = new Map<string, { pc: RTCPeerConnection; peer: Peer; queued: RTCIceCandidateInit[] }>();
  /** settles once camera/microphone are granted or refused: no connection is made before, or it would go out without my tracks */
  private ready: Promise<void> = Promise.resolve();
  /** candidates that arrived before their connection exists (the offer is still waiting for my media) */
  private early = new Map<string, RTCIceCandidateInit[]>();

  constructor(
    private readonly me: string,
    private readonly iceServers: RTCIceServer[],
    private readonly send: (m: Signal) => void,
    private readonly changed: () => void,
  ) {}

  /** Asks for camera and microphone; the call works receive-only when they are refused. */
  start(): Promise<void> {
    this.ready = this.getMedia();
    return this.ready;
  }

  private async getMedia(): Promise<void> {
    try {
      this.local = await navigator.mediaDevices.getUserMedia({ video: { width: 640, height: 360 }, audio: true });
      this.setCamera(true);
      this.setMic(true);
    } catch {
      this.local = null;
    }
    this.changed();
  }

  peers(): Peer[] {
    return [...this.pcs.values()].map((p) => p.peer);
  }

  /** A participant is in the lesson: the one with the smaller id calls. */
  peerPresent(id: string): void {
    if (id === this.me || this.pcs.has(id)) return;
    if (this.me < id) void this.offer(id);
  }

  peerLeft(id: string): void {
    this.early.delete(id);
    this.pcs.get(id)?.pc.close();
    this.pcs.delete(id);
    this.changed();
  }

  /** Forget every connection (the socket reconnected: peers are offered again). */
  reset(): void {
    for (const id of [...this.pcs.keys()]) this.peerLeft(id);
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

  async onOffer(from: string, sdp: string): Promise<void> {
    await this.ready;
    this.pcs.get(from)?.pc.close();
    const entry = this.connection(from);
    await entry.pc.setRemoteDescription({ type: 'offer', sdp });
    await this.drain(entry);
    const answer = await entry.pc.createAnswer();
    await entry.pc.setLocalDescription(answer);
    this.send({ type: 'rtc.answer', to: from, sdp: answer.sdp ?? '' });
  }

  async onAnswer(from: string, sdp: string): Promise<void> {
    const entry = this.pcs.get(from);
    if (!entry || entry.pc.signalingState !== 'have-local-offer') return;
    await entry.pc.setRemoteDescription({ type: 'answer', sdp });
    await this.drain(entry);
  }

  async onIce(from: string, candidate: RTCIceCandidateInit): Promise<void> {
    const entry = this.pcs.get(from);
    if (!entry) {
      this.early.set(from, [...(this.early.get(from) ?? []), candidate].slice(-50));
      return;
    }
    if (!entry.pc.remoteDescription) entry.queued.push(candidate);
    else await entry.pc.addIceCandidate(candidate).catch(() => {});
  }

  stop(): void {
    this.reset();
    for (const t of this.local?.getTracks() ?? []) t.stop();
  }

  private async drain(entry: { pc: RTCPeerConnection; queued: RTCIceCandidateInit[] }): Promise<void> {
    for (const c of entry.queued.splice(0)) await entry.pc.addIceCandidate(c).catch(() => {});
  }

  private connection(id: string) {
    const pc = new RTCPeerConnection({ iceServers: this.iceServers });
    const peer: Peer = { id, stream: null, state: 'new' };
    const entry = { pc, peer, queued: this.early.get(id) ?? [] };
    this.early.delete(id);
    this.pcs.set(id, entry);
    if (this.local) for (const t of this.local.getTracks()) pc.addTrack(t, this.local);
    else {
      pc.addTransceiver('video', { direction: 'recvonly' });
      pc.addTransceiver('audio', { direction: 'recvonly' });
    }
    pc.onicecandidate = (e) => {
      if (e.candidate) this.send({ type: 'rtc.ice', to: id, candidate: e.candidate.toJSON() });
    };
    pc.ontrack = (e) => {
      peer.stream = e.streams[0] ?? new MediaStream([e.track]);
      this.changed();
    };
    pc.onconnectionstatechange = () => {
      peer.state = pc.connectionState;
      this.changed();
    };
    this.changed();
    return entry;
  }

  private async offer(id: string): Promise<void> {
    await this.ready;
    if (this.pcs.has(id)) return;
    const entry = this.connection(id);
    const offer = await entry.pc.createOffer();
    await entry.pc.setLocalDescription(offer);
    this.send({ type: 'rtc.offer', to: id, sdp: offer.sdp ?? '' });
  }
}
