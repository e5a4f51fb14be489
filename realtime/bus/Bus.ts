import type { Envelope, Outgoing } from './LessonBus.js';

/**
 * The cross-node channel of each lesson, as the gateway uses it: LessonBus
 * over Redis pub/sub in production, InMemoryBus between gateways of one
 * process in unit tests (both pass test/realtime/busSuite.ts).
 */
export interface Bus {
  readonly nodeId: string;
  /** where envelopes of other nodes go: the gateway hands them to its Lesson */
  receiver: (lessonId: string, e: Envelope) => void;
  /** subscribes to the lesson's channel and says hello; resolves once subscribed, rejects if refused */
  subscribe(lessonId: string): Promise<void>;
  /** resolves once the channel stops delivering here (the gateway does not wait for it) */
  unsubscribe(lessonId: string): Promise<void>;
  /** resolves to the number of subscribed nodes that got it (1 = only this node) */
  publish(lessonId: string, e: Outgoing): Promise<number>;
  /** waits for the publishes in flight (settled either way) */
  idle(): Promise<void>;
  close(): Promise<void>;
}
