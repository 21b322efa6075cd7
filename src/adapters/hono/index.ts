export { type ClientIpOptions, clientIp, UNKNOWN_CLIENT } from '../../http/client-ip.ts';
export * from './rate-limiting.ts';
export * from './timeouts.ts';
