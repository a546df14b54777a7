/**
 * Opens the runtime a command works with: on the SQLite database named by `--db`, or on the
 * PostgreSQL one named by `--pg` (and `--pg-schema`), with the payload codec and the audit chain
 * the environment configures (`LOOM_CODEC_KEYS`, `LOOM_CODEC_KEY_ID`, `LOOM_AUDIT`,
 * `LOOM_AUDIT_KEY`, or their `_FILE` forms: secrets.ts): like `LOOM_FEATURES`, the deployment's
 * setting, shared by every process on the database, not a command's option; so are the queues'
 * and rate limiters' limits (`LOOM_QUEUES`, `LOOM_RATE_LIMITS`: flow-limits-env.ts). A malformed value is
 * a usage error raised before the store is opened; no message ever contains a key, and no
 * printed line a password (redact.ts).
 */
import { existsSync } from "node:fs";
import { resolve } from "node:path";
import { createRuntime, type Runtime } from "../runtime/runtime.ts";
import { sqliteStore } from "../store/sqlite/index.ts";
import type { Store } from "../store/spi.ts";
import type { AuditSetting } from "../trust/audit.ts";
import { aesGcmCodec, type PayloadCodec } from "../trust/codec.ts";
import { DEFAULT_DB, DEFAULT_PG_SCHEMA } from "./args.ts";
import { CliError, UsageError, errorLine } from "./cli-error.ts";
import { shellQuote } from "./format.ts";
import { redactPasswords } from "./redact.ts";
import { environmentWithSecrets } from "./secrets.ts";
import { flowLimitsFromEnv } from "./flow-limits-env.ts";

export interface OpenOptions {
  /** Run the background loop (timers, recovery). Read-only commands turn it off. */
  background: boolean;
  /**
   * Refuse a database file that does not exist yet, rather than create an empty one: a command
   * that only reads or answers an existing execution has nothing to do in a new database.
   */
  mustExist: boolean;
  onError?: (error: Error) => void;
  /** The most executions this process drives at once (default: no limit). */
  maxActive?: number;
  /** Which abandoned executions to recover (default: all of the module's flows). */
  recoverWhere?: (executionId: string) => boolean;
}

/** Where a command's executions are: `--db PATH`, or `--pg URL` with its schema. */
export interface Database {
  db: string;
  pg?: { url: string; schema: string };
}

/** What `--db` or `--pg` names, as it is written on the command line (for messages). */
export const describeDatabase = (where: Database): string =>
  where.pg ? `postgres schema ${where.pg.schema}` : `db ${where.db}`;

/**
 * The `--db` or `--pg` flags that name `where` again in a printed command ("" for the default),
 * the URL's password written `***` (redact.ts R1): the user fills it in again.
 */
export function databaseFlags(where: Database): string {
  if (where.pg) {
    const schema = where.pg.schema === DEFAULT_PG_SCHEMA ? "" : ` --pg-schema ${where.pg.schema}`;
    return ` --pg ${shellQuote(redactPasswords(where.pg.url))}${schema}`;
  }
  return where.db === DEFAULT_DB ? "" : ` --db ${shellQuote(where.db)}`;
}

async function openStore(where: Database, cwd: string, mustExist: boolean): Promise<Store> {
  if (where.pg) {
    try {
      // Loaded only for --pg: `pg` and the PostgreSQL store are a fifth of a short command's start.
      const { postgresStore } = await import("../store/postgres/index.ts");
      return await postgresStore({ connectionString: where.pg.url, schema: where.pg.schema });
    } catch (e) {
      const why = e instanceof Error ? e.message : String(e);
      throw new CliError(`cannot open PostgreSQL (${where.pg.schema}): ${why}`);
    }
  }
  const path = resolve(cwd, where.db);
  if (mustExist && !existsSync(path)) {
    throw new CliError(`no database at ${path} (run a flow first, or pass --db PATH)`);
  }
  return sqliteStore(path);
}

/**
 * The runtime of a command that drives one execution to its end (`loom run`, `loom fork
 * --module`): background work on, errors reported, and recovery of that execution and its chain's
 * generations only (`own()`, once known), so a short command never adopts, then abandons, other
 * work.
 */
export function openOwnRuntime(
  where: Database,
  io: { cwd: string; err(line: string): void },
  own: () => string | undefined,
  mustExist: boolean,
): Promise<Runtime> {
  return openRuntime(where, io.cwd, {
    background: true,
    mustExist,
    onError: (e) => io.err(`loom: ${errorLine(e)}`),
    recoverWhere: (executionId) => {
      const id = own();
      return id !== undefined && (executionId === id || executionId.startsWith(`${id}~`));
    },
  });
}

export async function openRuntime(
  where: Database,
  cwd: string,
  options: OpenOptions,
): Promise<Runtime> {
  const trust = trustFromEnv(environmentWithSecrets());
  const limits = flowLimitsFromEnv(process.env);
  return createRuntime({
    store: await openStore(where, cwd, options.mustExist),
    ...trust,
    ...limits,
    background: options.background,
    features: featuresFromEnv(process.env.LOOM_FEATURES),
    ...(options.onError ? { onError: options.onError } : {}),
    ...(options.recoverWhere ? { recoverWhere: options.recoverWhere } : {}),
    ...(options.maxActive !== undefined ? { maxActive: options.maxActive } : {}),
  });
}

/**
 * The fleet-wide feature flags, from `LOOM_FEATURES` (a comma list, e.g. `continueAsNew`): every
 * process sharing the database must agree (ADR 0109 D8), so they are the deployment's setting,
 * not a command's option.
 */
export function featuresFromEnv(value: string | undefined): { continueAsNew?: boolean } {
  const names = (value ?? "")
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s !== "");
  for (const name of names) {
    if (name !== "continueAsNew") {
      throw new CliError(
        `LOOM_FEATURES: unknown feature ${JSON.stringify(name)} (known: continueAsNew)`,
      );
    }
  }
  return names.includes("continueAsNew") ? { continueAsNew: true } : {};
}

/** What the environment turns on: a payload codec, the audit chain. */
export interface TrustSettings {
  codec?: PayloadCodec;
  audit?: AuditSetting;
}

/**
 * The codec and the audit from the environment (docs/cli.md):
 * - `LOOM_CODEC_KEYS`: comma-separated `id:key` pairs, each key 32 bytes as 64 hex characters or
 *   base64; `LOOM_CODEC_KEY_ID`: the id new payloads are sealed with (default: the last pair's).
 * - `LOOM_AUDIT`: `1` or `true` turns the audit chain on (`0`, `false` or empty: off);
 *   `LOOM_AUDIT_KEY` (any non-empty text) turns on a keyed audit (HMAC-SHA-256).
 * Throws a UsageError naming the variable and, for a pair, its position: a message never quotes
 * these variables' values (a key id given in the wrong place could be a key).
 */
export function trustFromEnv(env: NodeJS.ProcessEnv): TrustSettings {
  const codec = codecFromEnv(env.LOOM_CODEC_KEYS, env.LOOM_CODEC_KEY_ID);
  const audit = auditFromEnv(env.LOOM_AUDIT, env.LOOM_AUDIT_KEY);
  return { ...(codec ? { codec } : {}), ...(audit ? { audit } : {}) };
}

const KEY_ID = /^[A-Za-z0-9._-]{1,64}$/;
const HEX_KEY = /^[0-9a-fA-F]{64}$/;
const BASE64_KEY = /^[A-Za-z0-9+/_-]{43}=?$/;

function codecFromEnv(
  keysText: string | undefined,
  currentText: string | undefined,
): PayloadCodec | undefined {
  if (keysText === undefined) {
    if (currentText !== undefined) {
      throw new UsageError(
        "LOOM_CODEC_KEY_ID is set but LOOM_CODEC_KEYS is not: set both, or neither",
      );
    }
    return undefined;
  }
  const pairs = keysText.split(",");
  const keys: Record<string, Buffer> = {};
  const at = new Map<string, number>();
  pairs.forEach((pair, i) => {
    const n = i + 1;
    const where = `LOOM_CODEC_KEYS: pair ${n} of ${pairs.length}`;
    const colon = pair.indexOf(":");
    if (pair.trim() === "") {
      throw new UsageError(`${where} is empty (the value is comma-separated id:key pairs)`);
    }
    if (colon < 0) throw new UsageError(`${where} is not id:key (no ':' in it)`);
    const id = pair.slice(0, colon).trim();
    const key = pair.slice(colon + 1).trim();
    if (!KEY_ID.test(id)) {
      throw new UsageError(
        `${where}: its id must be 1 to 64 letters, digits, '.', '_' or '-' (the value is comma-separated id:key pairs)`,
      );
    }
    const bytes = HEX_KEY.test(key)
      ? Buffer.from(key, "hex")
      : BASE64_KEY.test(key)
        ? Buffer.from(key, "base64")
        : undefined;
    if (!bytes || bytes.length !== 32) {
      throw new UsageError(`${where}: its key must be 32 bytes, as 64 hex characters or as base64`);
    }
    const earlier = at.get(id);
    if (earlier !== undefined) {
      throw new UsageError(`LOOM_CODEC_KEYS: pairs ${earlier} and ${n} have the same id`);
    }
    at.set(id, n);
    keys[id] = bytes;
  });
  const ids = [...at.keys()];
  const currentKeyId = currentText ?? ids[ids.length - 1] ?? "";
  if (!at.has(currentKeyId)) {
    throw new UsageError(
      `LOOM_CODEC_KEY_ID is not the id of any of the ${ids.length} pair(s) in LOOM_CODEC_KEYS`,
    );
  }
  try {
    return aesGcmCodec({ keys, currentKeyId });
  } catch {
    // Checked above. The codec's message is not repeated: it could quote what was given.
    throw new UsageError("LOOM_CODEC_KEYS is not a valid codec configuration");
  }
}

function auditFromEnv(flag: string | undefined, key: string | undefined): AuditSetting | undefined {
  const text = flag?.trim().toLowerCase();
  let on: boolean | undefined;
  if (text === undefined) on = undefined;
  else if (text === "1" || text === "true") on = true;
  else if (text === "0" || text === "false" || text === "") on = false;
  else {
    throw new UsageError(
      "LOOM_AUDIT must be 1 or true (on), or 0, false or empty (off); a keyed audit takes its key in LOOM_AUDIT_KEY",
    );
  }
  if (key !== undefined) {
    if (key === "") throw new UsageError("LOOM_AUDIT_KEY is set but empty: give it the audit key");
    if (on === false) {
      throw new UsageError("LOOM_AUDIT_KEY is set but LOOM_AUDIT turns the audit off: unset one");
    }
    return { key };
  }
  return on ? true : undefined;
}
