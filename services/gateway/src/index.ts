export type { LogPort } from "./log/log-port.js";
