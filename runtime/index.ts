export * from "./config";
export { createStreamHandler, type StreamHandlerDeps } from "./consumer";
export { createRedriveHandler, type RedriveHandlerDeps } from "./redrive";
