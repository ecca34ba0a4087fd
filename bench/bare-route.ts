/**
 * The reference of `bench/receiver.ts`: a bare Fastify app whose only route, `POST
 * /webhooks/h2h`, answers 204 (Fastify's default JSON parser still reads the body). Listens on
 * 127.0.0.1 on a free port, prints `listening <url>` on stdout, and exits on SIGTERM.
 *
 *   node --import tsx bench/bare-route.ts
 */
import Fastify from 'fastify';

const app = Fastify({ logger: false });
app.post('/webhooks/h2h', (_request, reply) => {
  reply.code(204).send();
});

const origin = await app.listen({ host: '127.0.0.1', port: 0 });
process.stdout.write(`listening ${origin}/webhooks/h2h\n`);
process.once('SIGTERM', () => {
  app.close().then(() => process.exit(0));
});
