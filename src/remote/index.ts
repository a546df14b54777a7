/** The worker seam (ADR 0020 K8.5): the WorkerRuntime SPI, its local and HTTP forms, dispatch. */
export {
  checkedCancel,
  checkedDispatch,
  type CancelRequest,
  type DispatchOptions,
  type DispatchRequest,
  type ExecutionOutcome,
  type WorkerRuntime,
} from "./worker-runtime.ts";
export { LocalWorkerRuntime } from "./local-worker.ts";
export {
  RemoteWorkerRuntime,
  type RemoteWorkerOptions,
  type WorkerHealth,
} from "./remote-worker.ts";
export {
  createWorkerServer,
  type WorkerServer,
  type WorkerServerOptions,
} from "./worker-server.ts";
export { Dispatcher, type CancelResult, type DispatcherOptions } from "./dispatcher.ts";
export {
  AUDIENCE_HEADER,
  DIGEST_HEADER,
  MAX_SKEW_MS,
  NONCE_HEADER,
  SIGNATURE_HEADER,
  TIMESTAMP_HEADER,
  signedHeaders,
} from "./signing.ts";
export { MAX_BODY_BYTES, MAX_UNVERIFIED_BYTES } from "./request-body.ts";
export { MAX_JSON_DEPTH } from "./json-depth.ts";
