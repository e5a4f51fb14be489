const t0 = performance.now();
await import('./test/realtime/helpers/gateway.ts');
console.log('gw helper', Math.round(performance.now() - t0));
