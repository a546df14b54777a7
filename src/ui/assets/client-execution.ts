/**
 * Client script, part 4: an execution's page (`#/x/<id>`): its facts and status, the timeline,
 * resources, chain, children, folded state and raw events, kept up to date from the live stream
 * while it runs; and Cancel, Resume and Send, each behind an inline confirmation.
 * (A template literal: no backtick or dollar-brace in here.)
 */
export const CLIENT_EXECUTION = String.raw`
const MAX_EVENT_ROWS = 1000;

function eventRow(e, row) {
  const payload = JSON.stringify(e.payload);
  return h("tr", { "data-testid": "event-row", "data-kind": e.kind },
    h("td", { class: "num" }, String(e.seq)),
    h("td", { class: "num" }, "+" + fmtDuration(row ? row.offsetMs : 0)),
    h("td", { class: "mono" }, e.kind),
    h("td", {}, row ? row.text : ""),
    h("td", { class: "payload" }, h("details", {},
      h("summary", {}, payload.length > 60 ? payload.slice(0, 59) + "…" : payload),
      h("pre", {}, JSON.stringify(e, null, 2)))));
}

function chainSection(chain, shownId) {
  if (!chain) return [h("p", { class: "muted" }, "A single generation (it never continued).")];
  return [
    h("p", {}, "Chain ", h("span", { class: "mono" }, chain.chainId), ": " + chain.generations.length + " generation(s)",
      chain.routedHead ? [", routed head ", h("a", { href: execHref(chain.routedHead), class: "mono" }, chain.routedHead)] : "",
      chain.partial ? " (only the nearest generations are read)" : ""),
    h("ol", { start: chain.generations.length ? chain.generations[0].generation : 0, "aria-label": "Generations" },
      chain.generations.map((g) => h("li", { class: g.executionId === chain.head ? "gen-head" : "" },
        g.executionId === shownId ? h("span", { class: "mono" }, g.executionId + " (this one)")
          : h("a", { href: execHref(g.executionId), class: "mono" }, g.executionId),
        " ", badge(g.status), g.executionId === chain.head ? " ← head" : ""))),
  ];
}

function childNodes(nodes) {
  return h("ul", {}, nodes.map((n) => h("li", {},
    h("a", { href: execHref(n.head || n.executionId), class: "mono" }, n.executionId), " ",
    h("span", { class: "muted" }, n.flow + (n.detached ? ", detached" : "")), " ",
    n.status ? badge(n.status) : h("span", { class: "muted" }, "(not readable)"),
    n.head ? h("span", { class: "muted" }, " head " + n.head) : "",
    n.children.length ? childNodes(n.children) : "")));
}

function childrenSection(tree, forkedFrom) {
  const out = [];
  if (forkedFrom) out.push(h("p", { "data-testid": "forked-from" }, "Forked from ", h("a", { href: execHref(forkedFrom.executionId), class: "mono" }, forkedFrom.executionId), " at sequence " + forkedFrom.seq + " (its clock starts at the fork)"));
  if (tree.parent) out.push(h("p", {}, "Spawned by ", h("a", { href: execHref(tree.parent), class: "mono" }, tree.parent)));
  if (tree.children.length === 0) out.push(h("p", { class: "muted" }, "No children."));
  else out.push(h("div", { class: "tree" }, childNodes(tree.children)));
  return out;
}

/** A button that asks first: an inline confirmation step before run() is called. */
function guarded(label, testid, question, yesLabel, run, danger) {
  const box = h("div");
  const message = h("p", { class: "message", role: "status" });
  const button = h("button", { type: "button", class: danger ? "danger" : "primary", "data-testid": testid }, label);
  button.addEventListener("click", () => {
    message.textContent = "";
    message.setAttribute("class", "message");
    let prepared;
    try {
      prepared = run.prepare ? run.prepare() : undefined;
    } catch (err) {
      message.textContent = err.message;
      message.setAttribute("class", "message error");
      return;
    }
    const yes = h("button", { type: "button", class: danger ? "danger" : "primary", "data-testid": "confirm" }, yesLabel);
    const no = h("button", { type: "button", "data-testid": "confirm-no" }, "Back");
    const step = h("div", { class: "confirm", role: "group", "aria-label": "Confirm " + label.toLowerCase() },
      h("span", {}, question), yes, no);
    no.addEventListener("click", () => {
      step.remove();
      button.disabled = button.dataset.locked === "true";
      button.focus();
    });
    yes.addEventListener("click", () => {
      yes.disabled = true;
      no.disabled = true;
      run.go(prepared).then((text) => {
        message.textContent = text;
        announce(text);
      }).catch((err) => {
        message.textContent = (err.code ? err.code + ": " : "") + err.message;
        message.setAttribute("class", "message error");
      }).finally(() => { step.remove(); button.disabled = button.dataset.locked === "true"; });
    });
    button.disabled = true;
    box.insertBefore(step, message);
    yes.focus();
  });
  append(box, [button, message]);
  return box;
}

function parseJsonField(textarea, what) {
  const text = textarea.value.trim();
  if (text === "") return null;
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new Error(what + " is not JSON: " + err.message);
  }
}

function actionsSection(id, afterAction) {
  if (isReadOnly()) {
    const note = h("p", { class: "muted", "data-testid": "read-only" }, "This dashboard is read-only: it takes no cancel, resume or message.");
    return { el: note, setEnded() {} };
  }
  const ended = h("p", { class: "muted", hidden: true }, "This execution has ended: it takes no cancel, resume or message.");
  const reason = h("input", { type: "text", id: "cancel-reason", placeholder: "why (optional)" });
  const payload = h("textarea", { id: "resume-payload", spellcheck: "false" }, "{}");
  const message = h("textarea", { id: "send-message", spellcheck: "false" }, "{}");
  const topic = h("input", { type: "text", id: "send-topic", placeholder: "default topic" });
  const cancel = guarded("Cancel…", "cancel", "Cancel this execution? Its running steps are aborted.", "Yes, cancel it", {
    go: () => post(apiPath(id) + "/cancel", { reason: reason.value.trim() || undefined }).then((r) => {
      afterAction();
      return r.cancelled ? "Cancelled." : "It had already ended.";
    }),
  }, true);
  const resume = guarded("Resume…", "resume", "Resume this execution with this payload?", "Yes, resume", {
    prepare: () => parseJsonField(payload, "The payload"),
    go: (value) => post(apiPath(id) + "/resume", { payload: value }).then(() => { afterAction(); return "Resumed."; }),
  }, false);
  const send = guarded("Send…", "send", "Send this message to the execution's chain inbox?", "Yes, send", {
    prepare: () => parseJsonField(message, "The message"),
    go: (value) => post(apiPath(id) + "/send", { message: value, topic: topic.value.trim() || undefined })
      .then((r) => { afterAction(); return "Sent: message " + r.seq + " of chain " + r.chainId + "."; }),
  }, false);
  const panel = h("div", { class: "actions" },
    h("div", { class: "panel" }, h("h3", {}, "Cancel"), h("label", { class: "field", for: "cancel-reason" }, "Reason"), reason, h("p", {}), cancel),
    h("div", { class: "panel" }, h("h3", {}, "Resume"), h("label", { class: "field", for: "resume-payload" }, "Payload (JSON)"), payload, resume),
    h("div", { class: "panel" }, h("h3", {}, "Send"), h("label", { class: "field", for: "send-topic" }, "Topic"), topic,
      h("label", { class: "field", for: "send-message" }, "Message (JSON)"), message, send));
  return {
    el: h("div", {}, ended, panel),
    /** Turns the buttons off once the execution has ended. */
    setEnded(isEnded) {
      ended.hidden = !isEnded;
      for (const b of panel.querySelectorAll("[data-testid=cancel], [data-testid=resume], [data-testid=send]")) {
        b.dataset.locked = isEnded ? "true" : "";
        b.disabled = isEnded;
      }
    },
  };
}

function showExecution(id) {
  document.title = id + " · Loom";
  let disposed = false;
  let stream = null;
  let ticker = null;
  let model = null;
  const status = h("span", { class: "badge", "data-testid": "status", role: "status", "aria-live": "polite" }, "…");
  const facts = h("dl", { class: "facts" });
  const timelineEl = h("div", { class: "timeline panel", "data-testid": "timeline" });
  const resourcesEl = h("div", { class: "panel" });
  const chainEl = h("div", { class: "panel" });
  const childrenEl = h("div", { class: "panel" });
  const stateEl = h("pre", { class: "json", "data-testid": "state", tabindex: "0" });
  const eventsBody = h("tbody");
  const eventsNote = h("p", { class: "muted" });
  const liveNote = h("span", { class: "muted live-note" });
  const actions = actionsSection(id, () => { if (!stream) load(); });
  mainEl.append(
    h("p", {}, h("a", { href: "#/" }, "← Executions")),
    h("h1", {}, h("span", { class: "mono" }, id), " ", status, " ", liveNote),
    h("section", { "aria-label": "Facts", class: "panel" }, facts),
    h("h2", {}, "Actions"), actions.el,
    h("h2", {}, "Timeline"), timelineEl,
    h("h2", {}, "Resources"), resourcesEl,
    h("h2", {}, "Chain"), chainEl,
    h("h2", {}, "Children"), childrenEl,
    h("h2", {}, "Folded state"), stateEl,
    h("h2", {}, "Events"), eventsNote,
    h("div", { class: "panel" }, h("table", { class: "events", "aria-label": "Events" },
      h("thead", {}, h("tr", {}, ["Seq", "At", "Kind", "What", "Envelope"].map((t, i) =>
        h("th", { scope: "col", class: i < 2 ? "num" : "" }, t)))), eventsBody)));

  const nowOffset = () => model.nowMs + (performance.now() - model.receivedAt) - model.bars.t0Ms;
  const live = () => model && !TERMINAL.has(model.summary.status);

  function drawFacts() {
    const s = model.summary, st = model.state;
    const fact = (k, v) => [h("dt", {}, k), h("dd", {}, v)];
    facts.replaceChildren(...[
      fact("Flow", s.flow + (st.flowVersion ? " v" + st.flowVersion : "")),
      fact("Started", fmtTime(s.startedAtMs)),
      fact("Updated", fmtTime(s.updatedAtMs) + " (" + fmtDuration(s.updatedAtMs - s.startedAtMs) + " after the start)"),
      fact("Last sequence", String(s.head)),
      st.deadlineMs ? fact("Deadline", fmtTime(s.startedAtMs + st.deadlineMs)) : [],
      st.error ? fact("Error", st.error.code + ": " + st.error.message) : [],
      st._quotaExceeded ? fact("Quota exceeded", st._quotaExceeded.dimension + " of the " + st._quotaExceeded.budget + " budget") : [],
    ].flat());
  }
  function drawTimeline() {
    timelineEl.replaceChildren(...timelineSection(model.bars, nowOffset(), live()));
  }
  function drawAll() {
    setBadge(status, model.summary.status);
    actions.setEnded(TERMINAL.has(model.summary.status));
    drawFacts();
    drawTimeline();
    resourcesEl.replaceChildren(...resourcesSection(model.resources));
    stateEl.textContent = JSON.stringify(model.state, null, 2);
  }
  function addEvents(events, rows) {
    const byseq = new Map(rows.map((r) => [r.seq, r]));
    for (const e of events) eventsBody.append(eventRow(e, byseq.get(e.seq)));
    while (eventsBody.children.length > MAX_EVENT_ROWS) eventsBody.firstElementChild.remove();
    model.lastSeq = events.length ? events[events.length - 1].seq : model.lastSeq;
    eventsNote.textContent = model.omitted > 0 ? "The newest events are shown; " + model.omitted + " older ones are not." : "";
  }
  function openStream() {
    if (stream || disposed || !live()) return;
    stream = new EventSource(apiPath(id) + "/live?from=" + (model.lastSeq + 1));
    liveNote.textContent = "live";
    stream.addEventListener("update", (ev) => {
      const u = JSON.parse(ev.data);
      Object.assign(model, { summary: u.summary, state: u.state, bars: u.bars, resources: u.resources, nowMs: u.nowMs, receivedAt: performance.now() });
      addEvents(u.events, u.timeline);
      drawAll();
      announce("Status " + u.summary.status + ", " + u.events.length + " new event(s)");
    });
    stream.addEventListener("end", () => closeStream());
    // A stream the server refused for good (a 404 after retention, a 503) is CLOSED: say so, so
    // the page stops claiming to be live and reloads after an action.
    stream.addEventListener("error", () => { if (!live() || (stream && stream.readyState === EventSource.CLOSED)) closeStream(); });
  }
  function closeStream() {
    if (stream) stream.close();
    stream = null;
    liveNote.textContent = "";
  }
  function load() {
    api(apiPath(id)).then((d) => {
      if (disposed) return;
      closeStream();
      model = Object.assign({}, d, { receivedAt: performance.now(), lastSeq: -1, omitted: d.omittedEvents });
      eventsBody.replaceChildren();
      addEvents(d.events, d.timeline);
      chainEl.replaceChildren(...chainSection(d.chain, id));
      childrenEl.replaceChildren(...childrenSection(d.children, d.state && d.state._forkedFrom));
      drawAll();
      openStream();
    }).catch((err) => {
      if (disposed) return;
      mainEl.replaceChildren(h("p", {}, h("a", { href: "#/" }, "← Executions")), h("h1", {}, h("span", { class: "mono" }, id)), errorBox(err));
    });
  }
  load();
  ticker = setInterval(() => {
    if (live() && model.bars.bars.some((b) => b.endMs === null)) drawTimeline();
  }, 500);
  return {
    dispose() {
      disposed = true;
      closeStream();
      clearInterval(ticker);
    },
  };
}

window.addEventListener("hashchange", route);
route();
`;
