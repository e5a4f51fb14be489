// The baseline: a bare Koa "hello" on the same machine, same load, same run.
import Koa from 'koa';

const app = new Koa();
app.use((ctx) => {
  ctx.body = { hello: 'world' };
});
app.listen(Number(process.env.PORT), '127.0.0.1');
