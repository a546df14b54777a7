/** `loom --help`: the text every usage error can show (docs/cli.md says the same at length). */
import { EXECUTION_STATUSES } from "../kernel/events.ts";
import { DEFAULT_DB, DEFAULT_PG_SCHEMA, DEFAULT_UI_PORT } from "./args-command.ts";

export const USAGE = `usage: loom <command> [arguments] [--db PATH | --pg URL [--pg-schema NAME]]

commands:
  init [dir]             write a new project that uses Loom as an npm package into dir
                         (default: the working directory); refuses if a file it writes exists
  run <module> <flow> [--input JSON] [--id ID] [--subject ID] [--quiet]
                         start a flow of <module> and wait for its outcome (printed as JSON on
                         stdout; each step on stderr as it ends, unless --quiet);
                         --subject names the data subject whose data it holds
  worker <module> [--max-active N]
                         drive the module's flows and recover abandoned executions
                         (at most N at once) until SIGINT or SIGTERM
  ls [--status S[,S]] [--flow NAME] [--limit N] [--after ID] [--json]
                         list executions by id, optionally only those with these statuses or
                         of this flow; --limit N and --after ID page through them
  show <id> [--json]     an execution's folded state and the timeline of its log
  show <id> --step NAME [--json]
                         one call in full (a call id, or every call of a step name): input,
                         output or error, attempts, metering and price, taint marks
  show <id> --llm [--json]
                         the execution's LLM calls as conversations: system, messages, tool
                         calls, the answer, tokens, price, and whether a budget severed it
  resume <id> [JSON]     answer an execution's suspend with a JSON payload
  send <id> <JSON> [--topic T] [--key K]
                         post a message to the inbox of the execution's chain (ctx.receive);
                         --key makes a retry a no-op
  fork <id> <seq> [--id NEW] [--budget JSON] [--keep-deadline] [--module M [--quiet]]
                         copy an execution's log up to sequence <seq> into a new execution and
                         print its id; a worker drives it on, or with --module this command
                         does, and prints its outcome like run; --budget gives the copy a
                         budget of its own, no larger than the original's (what the copy
                         spent counts against it)
  serve <module> --port N (--secret-env NAME | --secret-file PATH) [--host H]
        [--worker-id ID] [--tls-cert FILE --tls-key FILE] [--max-active N]
        [--max-connections N] [--max-unverified-bytes N] [--request-timeout-ms N]
                         drive the module's flows like worker, and serve them over HTTP, or
                         HTTPS with --tls-cert/--tls-key (POST /dispatch, POST /cancel,
                         GET /health; requests signed with the secret in environment variable
                         NAME or in file PATH, for the worker id ID, default its URL);
                         --max-connections and --max-unverified-bytes are per client address;
                         prints its URL
  cancel <id> [--reason TEXT]
                         cancel an execution; its owner aborts what is in flight
  schedules [--json]     the cron schedules, with each one's next occurrence (none if paused)
  schedules pause|resume <name>
                         pause a schedule (it starts nothing), or resume it from now (the
                         occurrences missed while paused never start)
  verify <id> [--json]   check an execution's audit chain (exit 1 when it was tampered with)
  erase-subject <subject> --yes [--json]
                         make a data subject's payloads unrecoverable: cancel its live
                         executions, record the erasure, destroy its key (irreversible)
  ui [--port N] [--host H] [--allow-host NAME[,NAME]] [--token-file PATH] [--read-only] [--module M]
                         serve the web UI on http://H:N (default 127.0.0.1:${DEFAULT_UI_PORT}; 0: any
                         free port) until SIGINT or SIGTERM; prints its URL and, unless the
                         token comes from --token-file or LOOM_UI_TOKEN_FILE, a sign-in URL
                         holding a new access token; --read-only: no cancel, resume or send;
                         --module M: its flows can be rerun and driven from the page

options:
  --db PATH              the SQLite database (default ${DEFAULT_DB})
  --pg URL               a PostgreSQL database instead (a fleet shares one: every process
                         given the same URL and schema sees and drives the same executions)
  --pg-schema NAME       the schema Loom's tables live in (default ${DEFAULT_PG_SCHEMA})
  -h, --help             print this help

environment (every command, and every process sharing the database, needs the same):
  LOOM_CODEC_KEYS        seal payloads: comma-separated id:key pairs, each key 32 bytes as
                         64 hex characters or base64 (e.g. k1:<hex>,k2:<hex>)
  LOOM_CODEC_KEY_ID      the key new payloads are sealed with (default: the last pair's)
  LOOM_AUDIT=1           stamp the audit chain on every event (SHA-256)
  LOOM_AUDIT_KEY         stamp a keyed audit chain (HMAC-SHA-256 with this text)
  LOOM_CODEC_KEYS_FILE, LOOM_AUDIT_KEY_FILE
                         the same, read from a file: keeps the key out of the environment
  LOOM_FEATURES          fleet-wide feature flags (continueAsNew)
  LOOM_QUEUES            queue limits, JSON: {"support":{"concurrency":5,"keyConcurrency":1}}
  LOOM_RATE_LIMITS       rate limits, JSON: {"openai:gpt-4o":{"rpm":500,"outputTpm":10000}}

statuses: ${EXECUTION_STATUSES.join(", ")}
exit codes: 0 success, 1 error or failed flow, 2 usage error
docs: docs/cli.md`;
