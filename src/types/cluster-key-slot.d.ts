// cluster-key-slot ships no types: the CRC16 hash slot of a key (ioredis' own dependency).
declare module 'cluster-key-slot' {
  export default function calculateSlot(key: string | Buffer): number;
  export function generateMulti(keys: (string | Buffer)[]): number;
}
