import { io } from 'socket.io-client';

/**
 * Before the Socket.IO target is measured, one socket.io-client (the client
 * its users run) joins a lesson of its own and must get its `welcome`: the
 * load test's workers speak the wire protocol by hand (Engine.IO v4 frames
 * over the same `ws` client as the other targets, so the load generator costs
 * the same for all four), and this keeps that hand-written side honest.
 */
export function checkSocketIo(port: number, timeoutMs = 10_000): Promise<void> {
  return new Promise((resolve, reject) => {
    const socket = io(`http://127.0.0.1:${port}`, { transports: ['websocket'], query: { token: 'check', lesson: `check-${port}` }, reconnection: false });
    const timer = setTimeout(() => done(new Error('socket.io-client got no welcome from the Socket.IO relay')), timeoutMs);
    const done = (err?: Error) => {
      clearTimeout(timer);
      socket.disconnect();
      if (err) reject(err);
      else resolve();
    };
    socket.on('message', (m: { type?: string }) => m.type === 'welcome' && done());
    socket.on('connect_error', (err) => done(err));
  });
}
