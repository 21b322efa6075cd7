import { clientIp } from '../../http/client-ip.ts';
import { fixedWindow, partitioned } from '../../index.ts';
import { type Chapter, catchingWarnings, got, line, say, sent, why } from './chapter.ts';

/** Behind a proxy every request comes from the proxy; forwarded headers help only when the proxy is trusted. */
export const proxies: Chapter = {
  title: 'Clients behind a proxy',
  async run(tour) {
    const clock = tour.clock;
    const limiter = () => fixedWindow({ permitLimit: 5, window: '1m', clock });
    const base = await tour.serve(
      {
        policies: {
          socket: partitioned({ key: clientIp(), limiter: limiter() }),
          trusted: partitioned({ key: clientIp({ trustedProxies: ['127.0.0.1'] }), limiter: limiter() }),
        },
      },
      { '/socket': 'socket', '/trusted': 'trusted' },
    );
    say(
      `The tour plays a proxy at 127.0.0.1 in front of three clients (203.0.113.1–3); each client sends 4
      requests, 5 per client per minute allowed. X-Forwarded-For names the client.`,
    );
    const clients = (i: number) => ({ 'x-forwarded-for': `203.0.113.${(i % 3) + 1}` });
    const { result: socket, warnings } = await catchingWarnings(() =>
      tour.send(base, { path: '/socket', count: 12, parallel: false, headers: clients }),
    );
    sent('12 × GET /socket, keyed by the socket address (the default)');
    got(socket);
    for (const warning of warnings) {
      line(`and floodgate warned, once per process (${warning.code}):`);
      say(warning.message);
    }
    const trusted = await tour.send(base, { path: '/trusted', count: 12, parallel: false, headers: clients });
    sent('12 × GET /trusted, keyed by clientIp({ trustedProxies: ["127.0.0.1"] })');
    got(trusted);
    const spoof = await tour.send(base, {
      path: '/trusted',
      count: 4,
      parallel: false,
      headers: (i) => ({ 'x-forwarded-for': `10.9.9.${i}, 203.0.113.1` }),
    });
    sent('client 203.0.113.1 forges "X-Forwarded-For: 10.9.9.x" in front of its address, 4 × GET /trusted');
    got(spoof);
    why(
      `By the socket address, the three clients are one: the proxy. Two of them get refused for the third one's
      traffic. With the proxy trusted, floodgate reads X-Forwarded-For and takes the rightmost address the proxy
      did not write: each client has its own bucket. A client cannot escape by adding addresses on the left: the
      proxy appends the real one, which is the one counted (it had 1 request left).`,
    );
  },
};
