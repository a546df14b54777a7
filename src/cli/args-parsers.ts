/**
 * One parser per command: from a command line whose flags and argument count `checkFlags` has
 * accepted, the typed `Command`. Each checks its values in a fixed order, so a line with two
 * mistakes always names the same one.
 */
import { parseSecretSource, parseTls } from "./args-secrets.ts";
import { DEFAULT_UI_PORT, type Command, type CommandName, type Common } from "./args-command.ts";
import { SIGNATURES, type FlagValues } from "./args-flags.ts";
import {
  nonEmpty,
  parseCount,
  parseJson,
  parseMaxActive,
  parsePort,
  parseSequence,
  parseStatuses,
  parseSubject,
} from "./args-values.ts";
import { UsageError } from "./cli-error.ts";
import { LIST_SORTS } from "../store/list-query.ts";
import type { ListSort } from "../store/spi.ts";

/** A command line, its command name aside. */
export interface Line {
  values: FlagValues;
  /** The positional arguments after the command's name. */
  rest: readonly string[];
  /** The database the command opens (`--db`, or `--pg` and `--pg-schema`). */
  where: Common;
  /** The `i`th positional argument after the command's name ("" when absent). */
  arg: (i: number) => string;
}

type Parser = (line: Line) => Command;

export const PARSERS: Record<CommandName, Parser> = {
  init: ({ rest }) => ({
    name: "init",
    dir: rest[0] === undefined ? "." : nonEmpty(rest[0], "loom init", "a folder"),
  }),
  run: ({ values, where, arg }) => {
    const input = values.input === undefined ? undefined : parseJson(values.input, "--input");
    return {
      name: "run",
      ...where,
      module: arg(0),
      flow: arg(1),
      input,
      ...(values.id === undefined ? {} : { id: values.id }),
      ...(values.subject === undefined ? {} : { subject: parseSubject(values.subject) }),
      quiet: values.quiet ?? false,
    };
  },
  worker: ({ values, where, arg }) => {
    const maxActive = parseMaxActive(values["max-active"]);
    return maxActive === undefined
      ? { name: "worker", ...where, module: arg(0) }
      : { name: "worker", ...where, module: arg(0), maxActive };
  },
  serve: parseServe,
  ls: ({ values, where }) => ({
    name: "ls",
    ...where,
    json: values.json ?? false,
    ...(values.status === undefined ? {} : { status: parseStatuses(values.status) }),
    ...(values.flow === undefined ? {} : { flow: nonEmpty(values.flow, "--flow", "a name") }),
    ...(values.principal === undefined
      ? {}
      : { principal: nonEmpty(values.principal, "--principal", "a principal") }),
    ...(values.sort === undefined ? {} : { sort: parseSort(values.sort, values.after) }),
    ...(values.limit === undefined ? {} : { limit: parseCount(values.limit, "--limit") }),
    ...(values.after === undefined ? {} : { after: nonEmpty(values.after, "--after", "an id") }),
  }),
  send: ({ values, where, arg }) => ({
    name: "send",
    ...where,
    id: arg(0),
    message: parseJson(arg(1), "the message"),
    ...(values.topic === undefined ? {} : { topic: nonEmpty(values.topic, "--topic", "a name") }),
    ...(values.key === undefined ? {} : { key: nonEmpty(values.key, "--key", "a key") }),
  }),
  fork: parseFork,
  ui: parseUi,
  show: parseShow,
  schedules: ({ values, where, rest }) => {
    const json = values.json ?? false;
    const [verb, name] = rest;
    if (verb === undefined) return { name: "schedules", ...where, json };
    if ((verb !== "pause" && verb !== "resume") || name === undefined) {
      throw new UsageError("loom schedules takes no argument, or pause|resume and a schedule name");
    }
    return { name: "schedules", ...where, json, set: { verb, name } };
  },
  verify: ({ values, where, arg }) => ({
    name: "verify",
    ...where,
    id: arg(0),
    json: values.json ?? false,
  }),
  "erase-subject": parseEraseSubject,
  cancel: ({ values, where, arg }) =>
    values.reason === undefined
      ? { name: "cancel", ...where, id: arg(0) }
      : { name: "cancel", ...where, id: arg(0), reason: values.reason },
  resume: ({ where, rest, arg }) => {
    const payload = rest[1] === undefined ? undefined : parseJson(rest[1], "the resume payload");
    return { name: "resume", ...where, id: arg(0), payload };
  },
};

function parseServe({ values, where, arg }: Line): Command {
  type Serve = Extract<Command, { name: "serve" }>;
  const host = values.host ?? "127.0.0.1";
  if (host === "") throw new UsageError("--host needs a host name or address");
  const port = parsePort(values.port, "serve");
  const command: Serve = {
    name: "serve",
    ...where,
    module: arg(0),
    port,
    host,
    ...parseSecretSource(values["secret-env"], values["secret-file"]),
    ...parseTls(values["tls-cert"], values["tls-key"]),
  };
  const workerId = values["worker-id"];
  if (workerId !== undefined) command.workerId = nonEmpty(workerId, "--worker-id", "an id");
  const maxActive = parseMaxActive(values["max-active"]);
  if (maxActive !== undefined) command.maxActive = maxActive;
  const counts = [
    ["max-connections", "maxConnections"],
    ["max-unverified-bytes", "maxUnverifiedBytes"],
    ["request-timeout-ms", "requestTimeoutMs"],
  ] as const;
  for (const [flag, key] of counts) {
    const text = values[flag];
    if (text !== undefined) command[key] = parseCount(text, `--${flag}`);
  }
  return command;
}

function parseFork({ values, where, arg }: Line): Command {
  if (values.quiet !== undefined && values.module === undefined) {
    throw new UsageError(`--quiet goes with --module: without it loom fork waits for nothing`);
  }
  return {
    name: "fork",
    ...where,
    id: arg(0),
    atSequence: parseSequence(arg(1)),
    ...(values.id === undefined ? {} : { newId: values.id }),
    ...(values.budget === undefined ? {} : { budget: parseJson(values.budget, "--budget") }),
    keepDeadline: values["keep-deadline"] === true,
    ...(values.module === undefined
      ? {}
      : { module: nonEmpty(values.module, "--module", "a module path") }),
    quiet: values.quiet ?? false,
  };
}

function parseShow({ values, where, arg }: Line): Command {
  if (values.step !== undefined && values.llm === true) {
    throw new UsageError("--step and --llm show different things: give one of them");
  }
  return {
    name: "show",
    ...where,
    id: arg(0),
    json: values.json ?? false,
    ...(values.step === undefined
      ? {}
      : { step: nonEmpty(values.step, "--step", "a call id or step name") }),
    llm: values.llm === true,
  };
}

function parseUi({ values, where }: Line): Command {
  const host = values.host ?? "127.0.0.1";
  if (host === "") throw new UsageError("--host needs a host name or address");
  const port = values.port === undefined ? DEFAULT_UI_PORT : parsePort(values.port, "ui");
  const allowHosts = (values["allow-host"] ?? "")
    .split(",")
    .map((h) => h.trim())
    .filter((h) => h !== "");
  if ((host === "0.0.0.0" || host === "::") && allowHosts.length === 0) {
    throw new UsageError(
      `--host ${host} needs --allow-host NAME[,NAME]: the names the dashboard is reached by (a server that answered any name would be open to DNS rebinding)`,
    );
  }
  const tokenFile = values["token-file"];
  return {
    name: "ui",
    ...where,
    port,
    host,
    allowHosts,
    ...(tokenFile === undefined
      ? {}
      : { tokenFile: nonEmpty(tokenFile, "--token-file", "a path") }),
    readOnly: values["read-only"] === true,
    ...(values.module === undefined
      ? {}
      : { module: nonEmpty(values.module, "--module", "a module path") }),
  };
}

function parseEraseSubject({ values, where, arg }: Line): Command {
  const subject = parseSubject(arg(0));
  if (values.yes !== true) {
    throw new UsageError(
      `loom erase-subject refuses without --yes: it would cancel every live execution holding ` +
        `data of subject ${JSON.stringify(subject)}, record SUBJECT_ERASED in each of their logs ` +
        `and destroy the subject's key, so its payloads can never be read again. This is ` +
        `irreversible: pass --yes to do it (${SIGNATURES["erase-subject"]})`,
    );
  }
  return { name: "erase-subject", ...where, subject, json: values.json ?? false };
}

/** `loom ls --sort`: one of the list's sorts; `--after` pages the id order only. */
function parseSort(text: string, after: string | undefined): ListSort {
  if (!(LIST_SORTS as readonly string[]).includes(text)) {
    throw new UsageError(
      `--sort needs one of ${LIST_SORTS.join(", ")}, got ${JSON.stringify(text)}`,
    );
  }
  if (text !== "id" && after !== undefined) {
    throw new UsageError("--after pages the id order: use it without --sort, or with --sort id");
  }
  return text as ListSort;
}
