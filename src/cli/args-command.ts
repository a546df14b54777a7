/**
 * What a command line means once parsed (args.ts): one typed `Command`, and the defaults a
 * command takes for what its line leaves out. Types and constants only.
 */
import type { ExecutionStatus } from "../kernel/events.ts";
import type { ListSort } from "../store/spi.ts";

export const DEFAULT_DB = "./loom.db";
export const DEFAULT_PG_SCHEMA = "loom";
/** `loom ui`'s port when `--port` is not given. */
export const DEFAULT_UI_PORT = 7070;

export interface Common {
  /** As given on the command line; resolved against the working directory when opened. */
  db: string;
  /** A PostgreSQL database instead of the SQLite file (`--pg`, `--pg-schema`). */
  pg?: { url: string; schema: string };
}

export type Command =
  | { name: "help" }
  /** Takes no database: it writes a project scaffold into `dir`. */
  | { name: "init"; dir: string }
  | (Common & {
      name: "run";
      module: string;
      flow: string;
      input: unknown;
      id?: string;
      subject?: string;
      /** No progress lines on stderr. */
      quiet: boolean;
    })
  | (Common & { name: "worker"; module: string; maxActive?: number })
  | (Common & {
      name: "serve";
      module: string;
      port: number;
      host: string;
      /** Where the worker secret is: one of the two (never the command line itself). */
      secretEnv?: string;
      secretFile?: string;
      /** The id requests must be signed for (default: the URL it listens on). */
      workerId?: string;
      /** Serve HTTPS with this certificate and key (PEM files). */
      tls?: { certFile: string; keyFile: string };
      maxActive?: number;
      maxConnections?: number;
      maxUnverifiedBytes?: number;
      requestTimeoutMs?: number;
    })
  | (Common & {
      name: "ls";
      status?: ExecutionStatus[];
      flow?: string;
      principal?: string;
      /** Highest cost, or newest, first; "id" (the default) in id order. */
      sort?: ListSort;
      limit?: number;
      /** Only ids after this one (paging). */
      after?: string;
      json: boolean;
    })
  | (Common & {
      name: "show";
      id: string;
      json: boolean;
      /** One call's detail: a call id, or a step name (every call of that name). */
      step?: string;
      /** The LLM calls as conversations. */
      llm?: boolean;
    })
  | (Common & { name: "resume"; id: string; payload: unknown })
  | (Common & { name: "cancel"; id: string; reason?: string })
  | (Common & {
      name: "schedules";
      json: boolean;
      set?: { verb: "pause" | "resume"; name: string };
    })
  | (Common & { name: "verify"; id: string; json: boolean })
  | (Common & { name: "erase-subject"; subject: string; json: boolean })
  | (Common & { name: "send"; id: string; message: unknown; topic?: string; key?: string })
  | (Common & {
      name: "fork";
      id: string;
      atSequence: number;
      newId?: string;
      /** The fork's own budget, as JSON (checked by the runtime: fork.ts V6). */
      budget?: unknown;
      /** Keep the origin's clock (fork.ts V7): its deadline and step timeouts as they were. */
      keepDeadline: boolean;
      /** Drive the fork here, with this module's flows, and print its outcome. */
      module?: string;
      quiet: boolean;
    })
  | (Common & {
      name: "ui";
      port: number;
      host: string;
      allowHosts: string[];
      /** The access token's file (src/ui/auth.ts A4); else LOOM_UI_TOKEN_FILE, else a random one. */
      tokenFile?: string;
      /** Serve no cancel, resume or send (src/ui/server.ts S5). */
      readOnly: boolean;
      /** The user's module: its flows are registered, so the dashboard can rerun and drive them. */
      module?: string;
    });

/** Every command but `help`: each has a line of the flag table and a parser. */
export type CommandName = Exclude<Command["name"], "help">;
