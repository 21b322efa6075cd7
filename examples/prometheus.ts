/**
 * floodgate's rate-limiting metrics on a Prometheus endpoint.
 *
 *   npm install @opentelemetry/api @opentelemetry/sdk-metrics @opentelemetry/exporter-prometheus
 *   node --import tsx examples/prometheus.ts
 *   curl -s localhost:3000/ ; curl -s localhost:9464/metrics | grep floodgate
 *
 * floodgate records through `@opentelemetry/api` only; the SDK and the exporter are the application's choice.
 * Register the MeterProvider before the first request: instruments bind to it on first use.
 *
 * The two SDK packages are not dependencies of this repository, so they are loaded by name and typed here by
 * the few members used: the example type-checks without them and runs once they are installed.
 */
import http from 'node:http';
import { metrics } from '@opentelemetry/api';
import { rateLimiting } from '../src/adapters/node/index.ts';
import { clientIp } from '../src/http/client-ip.ts';
import { concurrency, fixedWindow, partitioned } from '../src/index.ts';

interface PrometheusExporterModule {
  PrometheusExporter: new (options: { port: number }) => object;
}
interface SdkMetricsModule {
  MeterProvider: new (options: { readers: object[] }) => object;
}
const load = <T>(name: string): Promise<T> => import(name) as Promise<T>;

const { PrometheusExporter } = await load<PrometheusExporterModule>('@opentelemetry/exporter-prometheus');
const { MeterProvider } = await load<SdkMetricsModule>('@opentelemetry/sdk-metrics');

// Serves GET http://localhost:9464/metrics in the Prometheus text format.
const exporter = new PrometheusExporter({ port: 9464 });
metrics.setGlobalMeterProvider(new MeterProvider({ readers: [exporter] }) as never);

const limit = rateLimiting({
  global: partitioned({ key: clientIp(), limiter: fixedWindow({ permitLimit: 100, window: '1m' }) }),
  policies: { reports: concurrency({ permitLimit: 2, queueLimit: 10 }) },
});

const home = limit((_req, res) => res.end('ok\n'));
const reports = limit((_req, res) => setTimeout(() => res.end('report\n'), 200), 'reports');

http
  .createServer((req, res) => (req.url?.startsWith('/reports') ? reports : home)(req, res))
  .listen(3000, () => console.log('http://localhost:3000  ·  metrics on http://localhost:9464/metrics'));

// What Prometheus then scrapes (names as the exporter writes them):
//   floodgate_requests_total{policy="global",result="acquired"} 42
//   floodgate_requests_total{policy="global",result="global_limiter"} 7
//   floodgate_requests_total{policy="reports",result="queue_full"} 3
//   floodgate_queued_requests{policy="reports",result="acquired"} 0
//   floodgate_time_in_queue_bucket{policy="reports",result="acquired",le="250"} 12
//   floodgate_active_leases{policy="reports",result="acquired"} 2
//   floodgate_lease_duration_bucket{…}
