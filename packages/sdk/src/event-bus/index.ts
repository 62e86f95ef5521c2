// The NATS `ServerEventBus` for SDK v2 servers (`createMcpHandler(factory, { bus })`).
export { createNatsServerEventBus } from './nats-event-bus.js';
export type { NatsServerEventBus } from './nats-event-bus.js';
export type { CreateNatsServerEventBusOptions, NatsServerEventBusConnection, NatsServerEventBusOptions } from './config.js';
export { EventBusError, EventBusErrorCode, isEventBusError } from './errors.js';
export type { EventBusErrorFields } from './errors.js';
export { busSubject, DEFAULT_BUS_CHANNEL } from './wire.js';
