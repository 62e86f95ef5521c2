// @tether/sdk: Tether inside official-SDK MCP servers: sessions served by any instance, the EventStore they write through, durable tasks, a NATS event bus for SDK v2 listen streams.
export { createSessionRouter } from './session-router.js';
export type { SessionRouter, SessionRouterFetchOptions, SessionRouterOptions } from './session-router.js';
export { clientPrincipalOf, identityOfAuthInfo } from './identity.js';
export type { SdkAuthInfo, SdkIdentity, SdkPrincipalSource } from './identity.js';
export type { SdkEventStore, SdkServer, SdkSessionInfo, SdkTransport, SdkTransportClass, SdkTransportOptions } from './session-host.js';
export { TetherEventStore } from './event-store.js';
export type { StoreResume, StoreResumeAccepted, TetherEventStoreOptions } from './event-store.js';
export { createWriterPresence } from './writer-presence.js';
export type { WriterPresence } from './writer-presence.js';
export type { WriterWatchOptions } from './writer-watch.js';
export { requestsOfTransport } from './sdk-transport-internals.js';
export type { JsonRpcId, JsonRpcMessage } from './json-rpc.js';
export { isTetherSdkError, TetherSdkError, TetherSdkErrorCode } from './errors.js';
export type { TetherSdkErrorFields } from './errors.js';
export { SDK_GET_STREAM } from './wire.js';
export { createNatsServerEventBus, EventBusError, EventBusErrorCode, isEventBusError, busSubject, DEFAULT_BUS_CHANNEL, type CreateNatsServerEventBusOptions, type EventBusErrorFields, type NatsServerEventBus, type NatsServerEventBusConnection, type NatsServerEventBusOptions } from './event-bus/index.js';
export { createDurableTasks, JetStreamTaskStore, JetStreamTaskMessageQueue, TaskErrorCode, TaskStoreError, isTaskStoreError, isTaskId, desiredTaskStreams, type CreateDurableTasksOptions, type DurableTasks, type DurableTasksOptions, type PrincipalTasks, type TaskErrorFields, type TtlPath } from './tasks/index.js';
