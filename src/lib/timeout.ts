/**
 * `p`, or a rejection `no answer within <ms> ms` once `ms` pass first (the
 * timer is cleared when `p` settles, and never keeps the process alive). `p`
 * itself is not cancelled.
 */
export function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
    timer.unref();
    p.then(
      (v) => {
        clearTimeout(timer);
        resolve(v);
      },
      (e) => {
        clearTimeout(timer);
        reject(e);
      },
    );
  });
}
