/**
 * A client without the worker's secret flooding its seam from one address (issue 22): what
 * test/security-seam.test.ts holds against worker-server.ts H5, and what `bench seam-flood` times
 * a signed dispatch against.
 *
 * Invariants:
 * F1. The attacker never holds the secret: its requests carry the seam's headers, fresh-looking
 *     (a current timestamp, a new nonce, the worker's audience), with a signature of zeros.
 * F2. It holds what it can: `stalled` forged dispatches whose 1 MiB bodies stop one byte short of
 *     their end, then `idle` sockets that never send a byte; every socket the server drops is
 *     opened again after 5 ms, for as long as the flood is on.
 * F3. `stop()` destroys every socket it holds and opens no more, so nothing of the flood keeps
 *     the process alive once it returns (the 5 ms reopen timers fire and do nothing).
 */
import { connect, type Socket } from "node:net";
import { signedHeaders } from "../src/index.ts";
import { SIGNATURE_HEADER } from "../src/remote/signing.ts";

/** Any key but the worker's: only the headers' shape is kept, the signature is zeros (F1). */
const NOT_THE_SECRET = "the-attacker-does-not-know-the-secret";
const BODY_BYTES = 1024 * 1024;
const REOPEN_MS = 5;

export interface Flood {
  /** Resolves once every stalled body is sent (or its socket was dropped first). */
  flooding: Promise<void>;
  /** Sockets the flood has opened so far, reopened ones included. */
  opened: () => number;
  /** Sockets open now. */
  held: () => number;
  /** Ends the flood (F3). */
  stop: () => void;
}

/** The head of a forged dispatch of `BODY_BYTES` to `url`, signed with nothing valid (F1). */
function forgedRequest(url: string): string {
  const headers = {
    ...signedHeaders(NOT_THE_SECRET, {
      method: "POST",
      path: "/dispatch",
      body: "",
      audience: new URL(url).origin,
    }),
    [SIGNATURE_HEADER]: "0".repeat(64),
    "content-length": String(BODY_BYTES),
  };
  const lines = Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`);
  return `POST /dispatch HTTP/1.1\r\nhost: x\r\n${lines.join("")}\r\n`;
}

/** Floods the worker server at `url` from the local address `from` (F2). */
export function flood(url: string, from: string, stalled: number, idle: number): Flood {
  const { hostname, port } = new URL(url);
  const sockets = new Set<Socket>();
  const request = forgedRequest(url);
  let on = true;
  let opened = 0;
  const open = (stall: boolean): Promise<void> => {
    if (!on) return Promise.resolve();
    const socket = connect({ port: Number(port), host: hostname, localAddress: from });
    opened++;
    sockets.add(socket);
    socket.on("error", () => undefined);
    const gone = new Promise<void>((resolve) =>
      socket.on("close", () => {
        sockets.delete(socket);
        resolve();
        setTimeout(() => void open(stall), REOPEN_MS);
      }),
    );
    if (!stall) return Promise.resolve();
    socket.write(request);
    const sent = new Promise<void>((resolve) =>
      socket.write(Buffer.alloc(BODY_BYTES - 1, 120), () => resolve()),
    );
    return Promise.race([sent, gone]);
  };
  const flooding = (async () => {
    await Promise.all(Array.from({ length: stalled }, () => open(true)));
    for (let i = 0; i < idle; i++) void open(false);
  })();
  const stop = () => {
    on = false;
    for (const socket of sockets) socket.destroy();
  };
  return { flooding, opened: () => opened, held: () => sockets.size, stop };
}
