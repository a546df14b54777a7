/**
 * An execution's actions (api-types.ts ApplicableActions): Cancel, Resume, Send, Fork and
 * Rerun, each a button shown only while it applies, that opens a small form; nothing is sent
 * before its confirm button, and a JSON field is parsed first, its fault said in words. A
 * read-only page draws none (server.ts S5). A fork or a rerun goes to the execution it made,
 * which shows its clock and budget (made.ts).
 */
import type { ApplicableActions, ForkRequest, MadeExecution, RerunRequest } from "../api-types.ts";
import { apiPath, errorText, execHref, post } from "./api.ts";
import { announce, h, isReadOnly, type Kid } from "./dom.ts";
import { parseJsonText } from "./format.ts";
import { remember } from "./made.ts";

export type ActionName = keyof ApplicableActions;
const ORDER: readonly ActionName[] = ["cancel", "resume", "send", "fork", "rerun"];
const LABEL: Record<ActionName, string> = {
  cancel: "Cancel…",
  resume: "Resume…",
  send: "Send…",
  fork: "Fork…",
  rerun: "Rerun…",
};

export interface ActionsView {
  el: HTMLElement;
  /** Shows the buttons of the actions that apply now. */
  update(applicable: ApplicableActions): void;
  /** Opens the fork form at a sequence number (a step panel's fork point). */
  openFork(atSequence: number): void;
}

/** What a form sends: its fields, and the request it makes of them (or a fault in words). */
interface Form {
  fields: Kid[];
  question: string;
  yes: string;
  send(): Promise<string> | string;
}

const area = (id: string, value: string): HTMLTextAreaElement =>
  h("textarea", { id, "data-testid": id, spellcheck: "false" }, value);
const line = (id: string, placeholder: string): HTMLInputElement =>
  h("input", { type: "text", id, "data-testid": id, placeholder, autocomplete: "off" });
const label = (forId: string, text: string): HTMLElement =>
  h("label", { class: "field", for: forId }, text);

/** The JSON of a field, or a thrown Error that says what is wrong with it. */
function json(el: HTMLTextAreaElement, what: string): unknown {
  const r = parseJsonText(el.value, what);
  if (!r.ok) throw new Error(r.message);
  return r.value;
}

function forms(
  id: string,
  input: () => unknown,
  forkAt: HTMLInputElement,
): Record<ActionName, () => Form> {
  const path = apiPath(id);
  return {
    cancel: () => {
      const reason = line("cancel-reason", "why (optional)");
      return {
        fields: [label("cancel-reason", "Reason"), reason],
        question: "Cancel this execution? Its running steps are aborted.",
        yes: "Yes, cancel it",
        send: () =>
          post<{ cancelled: boolean }>(`${path}/cancel`, {
            reason: reason.value.trim() || undefined,
          }).then((r) => (r.cancelled ? "Cancelled." : "It had already ended.")),
      };
    },
    resume: () => {
      const payload = area("resume-payload", "{}");
      return {
        fields: [label("resume-payload", "Payload (JSON)"), payload],
        question: "Resume this execution with this payload?",
        yes: "Yes, resume",
        send: () => {
          const value = json(payload, "The payload");
          return post(`${path}/resume`, { payload: value }).then(() => "Resumed.");
        },
      };
    },
    send: () => {
      const topic = line("send-topic", "default topic");
      const message = area("send-message", "{}");
      return {
        fields: [
          label("send-topic", "Topic"),
          topic,
          label("send-message", "Message (JSON)"),
          message,
        ],
        question: "Send this message to the execution's chain inbox?",
        yes: "Yes, send",
        send: () => {
          const value = json(message, "The message");
          if (value === undefined) throw new Error("The message is empty: write a JSON value.");
          return post<{ chainId: string; seq: number }>(`${path}/send`, {
            message: value,
            topic: topic.value.trim() || undefined,
          }).then((r) => `Sent: message ${r.seq} of chain ${r.chainId}.`);
        },
      };
    },
    fork: () => forkForm(path, forkAt),
    rerun: () => rerunForm(path, input()),
  };
}

function forkForm(path: string, at: HTMLInputElement): Form {
  const newId = line("fork-id", "a new id (optional)");
  const budget = area("fork-budget", "");
  const keep = h("input", {
    type: "checkbox",
    id: "fork-keep-deadline",
    "data-testid": "fork-keep-deadline",
  });
  return {
    fields: [
      label("fork-at", "At sequence number"),
      at,
      label("fork-id", "New id"),
      newId,
      label("fork-budget", "Budget (JSON, optional)"),
      budget,
      h("label", {}, keep, " keep the deadline"),
    ],
    question: "Fork this execution here? A new execution re-runs from that point.",
    yes: "Yes, fork",
    send: async () => {
      const seq = Number(at.value);
      if (at.value.trim() === "" || !Number.isInteger(seq) || seq < 0) {
        throw new Error("The sequence number must be a whole number ≥ 0.");
      }
      const b = json(budget, "The budget");
      if (b !== undefined && (typeof b !== "object" || b === null || Array.isArray(b))) {
        throw new Error('The budget must be a JSON object, e.g. {"costUsd": 1}.');
      }
      const body: ForkRequest = { atSequence: seq, keepDeadline: keep.checked };
      if (newId.value.trim()) body.newId = newId.value.trim();
      if (b !== undefined) body.budget = b;
      return made(await post<MadeExecution>(`${path}/fork`, body), "Forked");
    },
  };
}

function rerunForm(path: string, input: unknown): Form {
  const edited = area("rerun-input", input === undefined ? "" : JSON.stringify(input, null, 2));
  const newId = line("rerun-id", "a new id (optional)");
  return {
    fields: [
      label("rerun-input", "Input (JSON; as it was unless you edit it)"),
      edited,
      label("rerun-id", "New id"),
      newId,
    ],
    question: "Run this flow again as a new execution?",
    yes: "Yes, rerun",
    send: async () => {
      const value = json(edited, "The input");
      const body: RerunRequest = {};
      if (JSON.stringify(value) !== JSON.stringify(input))
        body.input = value as NonNullable<RerunRequest["input"]>;
      if (newId.value.trim()) body.newId = newId.value.trim();
      return made(await post<MadeExecution>(`${path}/rerun`, body), "Rerun");
    },
  };
}

function made(m: MadeExecution, what: string): string {
  remember(m);
  const hash = execHref(m.executionId);
  if (location.hash === hash) window.dispatchEvent(new HashChangeEvent("hashchange"));
  else location.hash = hash;
  return `${what} as ${m.executionId}.`;
}

export function actionsSection(id: string, input: () => unknown, after: () => void): ActionsView {
  if (isReadOnly()) {
    const note = h(
      "p",
      { class: "muted", "data-testid": "read-only" },
      "This dashboard is read-only: it takes no action.",
    );
    return { el: note, update() {}, openFork() {} };
  }
  const forkAt = h("input", {
    type: "number",
    id: "fork-at",
    "data-testid": "fork-at",
    min: 0,
    step: 1,
  });
  const make = forms(id, input, forkAt);
  const slot = h("div", { class: "action-form" });
  const none = h(
    "p",
    { class: "muted", "data-testid": "no-actions" },
    "No action applies to this execution now.",
  );
  const buttons = new Map<ActionName, HTMLButtonElement>();
  const open = (name: ActionName): void => {
    for (const b of buttons.values())
      b.setAttribute("aria-expanded", String(b === buttons.get(name)));
    slot.replaceChildren(formEl(name, make[name](), () => close(name), after));
  };
  const close = (name: ActionName): void => {
    slot.replaceChildren();
    buttons.get(name)?.setAttribute("aria-expanded", "false");
    buttons.get(name)?.focus();
  };
  for (const name of ORDER) {
    const danger = name === "cancel";
    const b = h(
      "button",
      {
        type: "button",
        class: danger ? "danger" : "primary",
        "data-testid": name,
        "aria-expanded": "false",
        hidden: true,
      },
      LABEL[name],
    );
    b.addEventListener("click", () => open(name));
    buttons.set(name, b);
  }
  const message = h("p", { class: "message", role: "status", "data-testid": "action-message" });
  return {
    el: h(
      "div",
      { class: "actions", "data-testid": "actions" },
      none,
      h("div", { class: "action-bar" }, [...buttons.values()]),
      slot,
      message,
    ),
    update(applicable) {
      let any = false;
      for (const [name, b] of buttons) {
        b.hidden = !applicable[name];
        any ||= applicable[name];
        if (!applicable[name] && b.getAttribute("aria-expanded") === "true") slot.replaceChildren();
      }
      none.hidden = any;
    },
    openFork(atSequence) {
      forkAt.value = String(atSequence);
      if (!buttons.get("fork")?.hidden) open("fork");
      forkAt.focus();
    },
  };
}

function formEl(name: ActionName, form: Form, close: () => void, after: () => void): HTMLElement {
  const message = h("p", { class: "message", role: "status", "data-testid": "form-message" });
  const yes = h(
    "button",
    { type: "button", class: name === "cancel" ? "danger" : "primary", "data-testid": "confirm" },
    form.yes,
  );
  const no = h("button", { type: "button", "data-testid": "confirm-no" }, "Back");
  no.addEventListener("click", close);
  yes.addEventListener("click", () => {
    message.textContent = "";
    message.className = "message";
    yes.disabled = true;
    Promise.resolve()
      .then(() => form.send())
      .then((text) => {
        message.textContent = text;
        announce(text);
        after();
      })
      .catch((err: unknown) => {
        message.textContent = errorText(err);
        message.className = "message error";
      })
      .finally(() => (yes.disabled = false));
  });
  return h(
    "div",
    {
      class: "panel form",
      role: "group",
      "aria-label": LABEL[name].replace("…", ""),
      "data-testid": `${name}-form`,
    },
    form.fields,
    h("div", { class: "confirm" }, h("span", {}, form.question), yes, no),
    message,
  );
}
