let t=performance.now();
for (const m of process.argv.slice(2)) { await import(m); const n=performance.now(); console.log(m, Math.round(n-t)); t=n; }
