// The console of `eventlog serve`: no framework, no build step.
// The key typed by the person is kept in this tab's sessionStorage only and sent as a Bearer header.
// Live views are Server-Sent Events read with fetch (EventSource cannot send a header).
// Every text from the log goes into the page with textContent, never as HTML, and escaped by the CLI's own
// rule (printable: ESCAPED and ESCAPES come from /console/escape.js, which the server writes from
// eventlog/printable.py), so a bidi override or a control character shows as \u202e, \x1b, as `status` prints it.
"use strict";

const KEY = "eventlog.key";
const $ = (id) => document.getElementById(id);
// An id in a URL is percent-encoded, but "", "." and ".." are written ";", ".;" and "..;": a browser folds the
// segments "." and ".." away (even written %2E) and an empty one names no page. The server reads them back
// (eventlog/serve/app.py: SPECIAL_SEGMENTS).
const SPECIAL_IDS = new Map([["", ";"], [".", ".;"], ["..", "..;"]]);
const idSegment = (id) => SPECIAL_IDS.get(id) ?? encodeURIComponent(id);
function segmentId(segment) {
  for (const [id, written] of SPECIAL_IDS) if (written === segment) return id;
  try { return decodeURIComponent(segment); } catch { return segment; }
}
// One page for both views: /sessions/ID shows a session, anything else what needs a person.
const PAGE = location.pathname.startsWith("/sessions/") ? "session" : "status";
const MAIN = PAGE + "-page";
document.body.dataset.page = PAGE;

function key() { return sessionStorage.getItem(KEY); }

// A text as a person may read it: what the CLI escapes is escaped.
function printable(text) { return String(text).replace(ESCAPED, (c) => ESCAPES[c]); }

function el(tag, text, cls) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = printable(text);
  if (cls) node.className = cls;
  return node;
}

function setText(id, text) { $(id).textContent = printable(text); }

function setConn(state, text) {
  $("conn").dataset.state = state;
  setText("conn", text);
}

function askKey(message) {
  setConn("idle", message ? "key refused" : "no key");
  $(MAIN).hidden = true;
  $("keybox").hidden = false;
  $("forget").hidden = true;
  $("stale").hidden = true;
  const e = $("keyerror");
  e.hidden = !message;
  setText("keyerror", message || "");
  $("key").focus();
}

// Why `k` cannot be a key, or null. A key (`eventlog keys add`: rlk_ and URL-safe base64) is visible ASCII; a
// header cannot even carry a character past U+00FF (fetch throws before sending, as if the server were down),
// and full-width IME input or a zero-width space pasted along are easy to miss.
function keyProblem(k) {
  const bad = /[^\x21-\x7e]/u.exec(k);
  if (bad === null) return null;
  const c = bad[0].codePointAt(0);
  return "this is not a valid key: character " + ([...k.slice(0, bad.index)].length + 1) + " is U+"
    + c.toString(16).toUpperCase().padStart(4, "0") + ", and a key is only ASCII letters, digits, - and _ "
    + "(rlk_..., as eventlog keys add printed it)";
}

function authHeaders(extra) {
  return Object.assign({ Authorization: "Bearer " + key() }, extra || {});
}

// Read a text/event-stream body; call onEvent(name, data, id) per event. Resolves when the stream ends.
async function readEvents(response, onEvent) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const frame = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      let name = "message", data = [], id = null;
      for (const line of frame.split("\n")) {
        if (line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        const val = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
        if (field === "event") name = val;
        else if (field === "data") data.push(val);
        else if (field === "id") id = val;
      }
      if (data.length) onEvent(name, data.join("\n"), id);
    }
  }
}

// --- is what the page shows current? --------------------------------------------------
// A view comes at least every tick (a stream's first event, "tick", says how often). When none came for
// STALE_TICKS ticks, the server cannot be reached, or the log cannot be judged, the page says it is not
// current, why and since when, greys what it still shows (never an all-clear) and names the command that
// asks the log itself; the next view makes it current again.

const STALE_TICKS = 3;
let tickS = 5;
let lastViewAt = 0;
let lastAsOf = null;
let staleKind = null;
let commands = null;

// What to paste comes with every tick, view and outage; `note` (a URL that names a user): its password is not in them.
function takeCommands(given) {
  if (!given) return;
  commands = given;
  $("lognote").hidden = !given.note;
  setText("lognote", given.note || "");
}

function fresh(asOf) {
  lastViewAt = performance.now();
  if (asOf) lastAsOf = asOf;
}

function current() {
  if (staleKind === null) return;
  staleKind = null;
  document.body.dataset.current = "yes";
  $(MAIN).dataset.old = "no";
  $("stale").hidden = true;
  $("asof-note").textContent = "";
}

// Not current: `why`, since `since` (a time; none: unknown). `old`: what the page shows is the last view (greyed).
function notCurrent(kind, why, since, old) {
  staleKind = kind;
  document.body.dataset.current = "no";
  $(MAIN).dataset.old = old ? "yes" : "no";
  const box = $("stale");
  const said = [el("strong", "Not current"), el("span", (since ? " since " + since : "") + ": " + why + ".")];
  if (old && lastAsOf) said.push(el("span", " What is shown was judged as of " + lastAsOf + " and may be wrong."));
  if (commands) said.push(el("span", " See for yourself: "), el("code", commands.status));
  box.replaceChildren(...said);
  box.hidden = false;
  $("asof-note").textContent = " (not current)";
  if (old && PAGE === "status") oldStatus();
  if (old && PAGE === "session") oldSession();
}

setInterval(() => {
  if (!lastViewAt || (staleKind !== null && staleKind !== "quiet")) return;
  const quiet = (performance.now() - lastViewAt) / 1000;
  if (quiet > STALE_TICKS * tickS) {
    setConn("down", "not current");
    notCurrent("quiet", "nothing new from the server for " + durationWords(quiet) + " (a view comes at least every "
      + durationWords(tickS) + ")", lastAsOf, true);
  }
}, 1000);

// Follow a live view: reconnects after a drop, asks for the key again on 401/403.
// `on` maps an event's name to what shows it; "tick" and "unavailable" are handled here.
function live(url, on, onMissing) {
  let stopped = false;
  async function connect() {
    const refused = keyProblem(key());
    if (refused !== null) {
      sessionStorage.removeItem(KEY);
      stopped = true;
      return askKey(refused);
    }
    setConn("connecting", "connecting…");
    let response;
    try {
      response = await fetch(url, { headers: authHeaders({ Accept: "text/event-stream" }), cache: "no-store" });
    } catch (err) {
      return retry("the server is unreachable");
    }
    if (response.status === 401 || response.status === 403) {
      const body = await response.json().catch(() => ({}));
      sessionStorage.removeItem(KEY);
      stopped = true;
      return askKey((body.message || "refused") + " (" + response.status + ")");
    }
    if (response.status === 404 && onMissing) {  // not there yet: said, and asked again (it may come)
      const body = await response.json().catch(() => ({}));
      fresh();
      current();
      setConn("live", "not found; watching for it");
      onMissing(body.message || "not found");
      setTimeout(connect, 2000);
      return;
    }
    if (!response.ok) {
      const body = await response.json().catch(() => ({}));
      return retry((body.message || "error") + " (" + response.status + ")");
    }
    $("keybox").hidden = true;
    $(MAIN).hidden = false;
    $("forget").hidden = false;
    setConn("live", "live");
    try {
      await readEvents(response, (name, data) => {
        const value = JSON.parse(data);
        if (name === "tick") {
          tickS = value.tick_s;
          takeCommands(value.commands);
          return;
        }
        if (name === "unavailable") {
          takeCommands(value.commands);
          setConn("down", "not current");
          fresh();
          notCurrent("unavailable", value.message, value.since, true);
          return;
        }
        setConn("live", "live");
        if (on[name]) on[name](value);
      });
    } catch (err) { /* dropped: reconnect below */ }
    retry("connection dropped");
  }
  function retry(why) {
    if (stopped) return;
    setConn("down", why + "; retrying…");
    notCurrent("down", why + "; retrying", lastAsOf, true);
    setTimeout(connect, 2000);
  }
  connect();
}

function showAsOf(text) {
  const t = $("asof");
  setText("asof", text || "–");
  if (text) t.dateTime = text;
}

// --- the status page ---------------------------------------------------------------

const SHOWN = 300;
// "/?all=1": every item of every group (and every waiting session), as `status --all`.
const EVERY = PAGE === "status" && new URLSearchParams(location.search).get("all") === "1";

// Re-render only what changed: a tick that changes nothing but the time leaves the page (focus, selection) alone.
const lastShown = {};
function changed(name, value) {
  const text = JSON.stringify(value, (k, v) => (k === "as_of" ? undefined : v));
  if (lastShown[name] === text) return false;
  lastShown[name] = text;
  return true;
}

// A duration for people, as `eventlog status` writes it: its two largest units ("2 h 5 min", "3 d", "40 s").
function durationWords(seconds) {
  if (seconds < 0) return "in " + durationWords(-seconds);
  let left = Math.floor(seconds);
  const values = [["d", 86400], ["h", 3600], ["min", 60], ["s", 1]].map(([unit, size]) => {
    const v = Math.floor(left / size);
    left -= v * size;
    return [v, unit];
  });
  let first = values.findIndex(([v]) => v > 0);
  if (first < 0) first = values.length - 1;
  const words = [values[first][0] + " " + values[first][1]];
  if (first + 1 < values.length && values[first + 1][0]) words.push(values[first + 1][0] + " " + values[first + 1][1]);
  return words.join(" ");
}

// One item as `eventlog status` prints it: "ID (for 2 h 5 min): reason", then the command to copy.
function itemLine(item, head = item.id) {
  const since = item.for_s === null ? "" : " (" + (item.for_s < 0 ? "" : "for ") + durationWords(item.for_s) + ")";
  return head + since + ": " + item.reason;
}

// A link to every item, and the command that prints them.
function showEvery(count) {
  const a = el("a", "show every item");
  a.href = "/?all=1";
  const p = el("p", "… and " + count + " more: ", "more");
  p.append(a);
  if (commands) p.append(" or ", el("code", commands.all));
  return p;
}

// The last view stays, greyed, and says nothing it cannot know now: no count, no all-clear.
function oldStatus() {
  lastShown.status = null;  // the next view is drawn whole
  $("count").textContent = "?";
  $("count-word").textContent = "things need a person now: not known (not current)";
  document.body.dataset.attention = "unknown";
  $("calm").hidden = true;
  if ($("waiting").children.length === 0) noneWaiting("Not known (not current).");
}

// What the list of waiting sessions says when it lists none: "None." (calm) only when that is known.
function noneWaiting(text) {
  const p = $("nowaiting");
  p.textContent = text;
  p.className = text === "None." ? "calm" : "muted";
  p.hidden = false;
}

function renderStatus(payload) {
  takeCommands(payload.commands);
  const status = payload.status;
  fresh(status && status.as_of);
  if (payload.problem) {
    setConn("down", "not current");
    notCurrent("problem", payload.problem.message, payload.problem.since, !status);
  } else {
    current();
  }
  if (!status) return;  // nothing can be said of the log: the last view stays, greyed
  showAsOf(status.as_of);
  if (!changed("status", payload)) return;
  setText("log", status.log);
  const count = status.needs_person;
  $("count").textContent = count;
  $("count-word").textContent = count === 1 ? "thing needs a person now" : "things need a person now";
  document.body.dataset.attention = count ? "yes" : "no";
  $("calm").hidden = count > 0;
  // Most urgent first, as the text screen (each group's urgency is the triage's; a stable sort keeps the rest)
  const groups = [...status.groups].sort((a, b) => a.urgency - b.urgency);
  $("needs").replaceChildren(...groups.map((g) => {
    const li = el("li", null, "group");
    li.dataset.reason = g.reason_code;
    li.append(el("h3", g.title + ": " + g.count));
    const items = el("ul", null, "items");
    items.append(...g.items.map((item) => {
      const row = el("li", null, "item");
      const line = el("span", itemLine(item), "line");
      if (item.domain === "sessions") {
        line.textContent = "";
        const a = el("a", item.id, "id");
        a.href = "/sessions/" + idSegment(item.id);
        line.append(a, printable(itemLine(item, "")));
      }
      row.append(line, el("code", item.next, "next"));
      return row;
    }));
    li.append(items);
    if (g.count > g.items.length) li.append(showEvery(g.count - g.items.length));
    return li;
  }));

  // Not known while the log cannot be judged (null), never "None."
  const waiting = payload.waiting || [];
  noneWaiting(payload.waiting ? "None." : "Not known: the log cannot be judged now.");
  $("nowaiting").hidden = waiting.length > 0;
  const listed = EVERY ? waiting : waiting.slice(0, SHOWN);
  $("waiting-more").replaceChildren(...(listed.length < waiting.length ? [showEvery(waiting.length - listed.length)]
    : []));
  const cut = status.groups.some((g) => g.count > g.items.length) || listed.length < waiting.length;
  $("toggle").hidden = !EVERY && !cut;
  $("waiting").replaceChildren(...listed.map((s) => {
    const li = el("li");
    const a = el("a", s.session_id, "id");
    a.href = "/sessions/" + idSegment(s.session_id);
    li.append(a, el("span", " " + s.admission_state + (s.attention ? " · " + s.attention : ""), "muted"));
    if (s.reason) li.append(el("span", " — " + s.reason, "muted"));
    return li;
  }));

  // The totals of each domain the log holds, as numbers (durations in words).
  const dl = $("headline");
  const rows = [];
  for (const [domain, numbers] of Object.entries(status.totals)) {
    const parts = Object.entries(numbers).filter(([, v]) => v !== null).map(([k, v]) =>
      k.replace(/_/g, " ").replace(/ s$/, "") + " " + (k.endsWith("_s") && typeof v === "number" ? durationWords(v)
        : typeof v === "object" ? "(" + (Object.entries(v).map(([r, n]) => r + " " + n).join(", ") || "none") + ")"
          : v));
    rows.push(el("dt", domain), el("dd", parts.join(", ")));
  }
  dl.replaceChildren(...rows);
}

// --- the session page --------------------------------------------------------------

const sessionId = PAGE === "session"
  ? segmentId(location.pathname.replace(/^\/sessions\//, "")) : null;
let formHeld = false;
let sessionRevision = null;
const turnsSeen = new Map();
const formKeys = new Map();

function turnUrl(turn) {
  return "/v1/sessions/" + idSegment(sessionId) + "/turns/" + idSegment(turn);
}

async function turnDetail(turn, li) {
  if (!turnsSeen.has(turn)) {
    turnsSeen.set(turn, fetch(turnUrl(turn), { headers: authHeaders(), cache: "no-store" })
      .then((r) => (r.ok ? r.json() : null)).catch(() => null));
  }
  const t = await turnsSeen.get(turn);
  if (!t) return;
  const bits = [t.outcome || "not finished"];
  if (t.terminal_reason) bits.push("terminal_reason " + t.terminal_reason);
  if (t.finished_at) bits.push("at " + t.finished_at);
  li.append(el("span", " — " + bits.join(", "), "muted"));
}

// What the session page says when this session needs nothing: "Nothing ..." (calm) only when that is known.
const SESSION_CALM = "Nothing about this session needs a person now.";
function noSessionNeeds(text) {
  const p = $("noneeds");
  p.textContent = text;
  p.className = text === SESSION_CALM ? "calm" : "muted";
  p.hidden = false;
}

// The last view stays, greyed, as the status page's does: no all-clear while it is not current.
function oldSession() {
  lastShown.session = null;  // the next view is drawn whole
  if ($("sneeds").children.length === 0) noSessionNeeds("Not known (not current).");
}

// The session is not in the log (`seen`: no longer; else not yet): say so, and offer no decision (nor the
// old items' commands: pasted, a decision fails "no session").
function sessionGone(message, seen) {
  lastShown.session = null;  // drawn whole when it comes back
  $("sneeds").replaceChildren();
  $("noneeds").hidden = true;
  setText("sid", sessionId);
  setText("state", seen ? "no longer in the log" : "not in the log");
  $("state").dataset.needs = "no";
  const m = $("missing");
  m.hidden = false;
  setText("missing", (seen ? "This session is no longer in the log (replaced or truncated?): " : "") + message);
  $("decisions").hidden = true;
  $("made-section").hidden = true;
  $("decide-section").hidden = true;
  $("session-page").dataset.old = "yes";
}

function renderSession(s) {
  fresh(s.as_of);
  current();
  showAsOf(s.as_of);
  $("missing").hidden = true;
  $("decisions").hidden = false;
  $("made-section").hidden = false;
  $("decide-section").hidden = false;
  $("session-page").dataset.old = "no";
  if (!changed("session", s)) return;
  setText("log", s.log);
  setText("sid", s.session_id);
  document.title = printable("recovery-ledger · " + s.session_id);
  const state = $("state");
  setText("state", s.admission_state + (s.attention ? " · " + s.attention : "")
    + (s.needs_decision ? " — waits for a decision" : ""));
  state.dataset.needs = s.needs_decision ? "yes" : "no";
  const facts = [
    ["admission state", s.admission_state], ["attention", s.attention || "none"],
    ["reason", s.reason || "none"], ["failures", s.failures],
    ["retry at", s.retry_at ? s.retry_at + (s.retry_due ? " (due now)" : "") : "none"],
    ["generation", s.generation], ["revision", s.revision],
    ["resumable", s.admission_state === "stopped" ? (s.resumable ? "yes" : "no (context gap)") : "—"],
  ];
  const needs = s.needs || [];
  if (needs.length > 0) $("noneeds").hidden = true;
  else noSessionNeeds(SESSION_CALM);
  $("sneeds").replaceChildren(...needs.map((item) => {
    const row = el("li", null, "item");
    row.dataset.reason = item.reason_code;
    row.append(el("span", itemLine(item, item.reason_code), "line"),
      el("code", item.next, "next"));
    return row;
  }));
  $("facts").replaceChildren(...facts.flatMap(([k, v]) => [el("dt", k), el("dd", v)]));

  // The log's bad lines are left out of this state: say so, first those that name this session (which,
  // why, the command that prints one). A decision is still judged as always; the person knows on what.
  const bad = s.bad_lines || { count: 0, first: [] };
  const named = s.named_by_bad_lines || [];
  const said = [];
  if (named.length > 0) {
    const p = el("p", named.length + " bad line(s) of the log name this session, left out of this state: it may "
      + "not be what happened; look at them before you decide. ", "named");
    named.forEach((b, i) => p.append(printable((i ? "; " : "") + "line " + b.line + ": " + b.reason + " (see it: "),
      el("code", b.next), ")"));
    said.push(p);
  }
  if (bad.count > 0) {
    said.push(el("p", "The log has " + bad.count + " bad line(s), left out of every state"
      + (bad.count > bad.first.length ? " (first " + bad.first.length + ")" : "") + ": "
      + bad.first.map((b) => "line " + b.line + ": " + b.reason).join("; ") + "."));
  }
  $("badlines").hidden = said.length === 0;
  $("badlines").replaceChildren(...said);

  $("noturns").hidden = s.unknown_turns.length > 0;
  $("turns").replaceChildren(...s.unknown_turns.map((turn) => {
    const li = el("li");
    li.append(el("code", turn));
    turnDetail(turn, li);
    return li;
  }));

  $("noaccept").hidden = s.would_accept.length > 0;
  $("accept").replaceChildren(...s.would_accept.map((d) => {
    const li = el("li");
    const b = el("button", d.decision + (d.target_turn_id ? " " + d.target_turn_id : ""), "pick");
    b.type = "button";
    b.addEventListener("click", () => pick(d, s.revision));
    li.append(b, el("span", " at revision " + d.expected_revision + (d.needs ? " · needs " + d.needs : ""), "muted"));
    return li;
  }));
  $("refuse").replaceChildren(...s.would_refuse.map((d) => el("li",
    d.decision + (d.target_turn_id ? " " + d.target_turn_id : "") + ": " + d.result + " — " + d.why)));

  // Every decision sent about this session, accepted or not (the audit trail): who moved it, when, and why.
  const made = s.decisions || [];
  $("nomade").hidden = made.length > 0;
  $("made").replaceChildren(...made.map(madeItem));

  // Once the person has touched the form, it keeps what they chose: the revision they saw (so a
  // decision made on an older view is refused as REQUEST_STALE, saying who moved the session; the same
  // form sent twice is one decision, formKey) and the turn they named (never another turn in its place).
  const turnSelect = $("turn");
  const chosen = turnSelect.value;
  const option = (value, text) => { const o = el("option", text); o.value = value; return o; };
  turnSelect.replaceChildren(option("", "(none)"), ...s.unknown_turns.map((t) => option(t, t)));
  if (formHeld) {
    if (chosen && !s.unknown_turns.includes(chosen)) turnSelect.prepend(option(chosen, chosen + " (no longer unknown)"));
    turnSelect.value = chosen;
  } else {
    turnSelect.value = s.unknown_turns[0] || "";
    $("revision").value = s.revision;
  }
  sessionRevision = s.revision;
  showRevisionNow();
}

// One decision of the audit trail: "line 20 · 2026-... · bob: close (revision 7) → accepted", its reason, and
// for a refusal why (and, for a repeat, which line it repeats).
function madeItem(r) {
  const li = el("li", null, "decision");
  li.dataset.result = r.result;
  const what = r.decision + (r.target_turn_id ? " " + r.target_turn_id : "") + " (revision " + r.expected_revision
    + ")";
  const again = r.first_line !== r.line ? " (key first used at line " + r.first_line + ")" : "";
  li.append(el("span", "line " + r.line + " · " + r.ts + " · ", "muted"), el("strong", r.actor || "unknown"),
    el("span", ": " + what + " → "), el("span", r.result + again, "outcome"),
    el("span", " — reason: " + r.reason, "reason"));
  if (r.result !== "accepted") li.append(el("span", " — why: " + r.why, "muted why"));
  return li;
}

function showRevisionNow() {
  const held = Number($("revision").value);
  const moved = $("revision").value !== "" && held !== sessionRevision;
  const sent = formKeys.has(requestOf(formBody()));
  $("revnow").textContent = "the session is at revision " + sessionRevision
    + (!moved ? "" : sent ? ": this form was sent at revision " + held + ": sending it again gets its first receipt "
      + "(pick a decision to decide again)"
      : ": this form says " + held + ", so it would be refused as stale (pick a decision again)");
  $("revnow").dataset.moved = moved ? "yes" : "no";
}

function pick(d, revision) {
  $("decision").value = d.decision;
  $("turn").value = d.target_turn_id || "";
  $("revision").value = revision;
  formHeld = true;
  showRevisionNow();
  $("reason").focus();
}

// A receipt as indented JSON, each of its lines escaped (JSON leaves a bidi override as it is).
function receiptText(receipt) {
  return JSON.stringify(receipt, null, 2).split("\n").map(printable).join("\n");
}

// What a receipt says of the bad lines that name its session ("" when none do).
function judgedWithout(receipt) {
  const named = receipt.named_by_bad_lines || [];
  return named.length === 0 ? "" : "; judged without the bad line(s) that name this session: "
    + named.map((b) => "line " + b.line).join(", ");
}

// One idempotency key per request the form holds (what the spec compares: decision, expected revision, target
// turn, evidence), kept while the page is open: sending the same form again (a double click, a second Send) is the
// same request with the same key, so the server answers with its first receipt instead of judging a second
// decision (which the first one made stale). Another decision, turn, evidence or revision is a new request
// (formKeys: request -> its key, declared with the page's other state).
function requestOf(body) {
  return JSON.stringify([body.decision, body.expected_revision, body.target_turn_id ?? null,
    body.evidence_ref ?? null]);
}
function formKey(body) {
  const request = requestOf(body);
  if (!formKeys.has(request)) {
    formKeys.set(request, crypto.randomUUID ? crypto.randomUUID()
      : Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, "0")).join(""));
  }
  return formKeys.get(request);
}

// The request the form holds, as the API takes it.
function formBody() {
  const body = {
    decision: $("decision").value,
    expected_revision: Number($("revision").value),
    reason: $("reason").value,
  };
  if ($("turn").value) body.target_turn_id = $("turn").value;
  if ($("evidence").value) body.evidence_ref = $("evidence").value;
  return body;
}

async function sendDecision(event) {
  event.preventDefault();
  const body = formBody();
  const idem = formKey(body);
  $("send").disabled = true;
  let status = 0, answer = {};
  try {
    const r = await fetch("/v1/sessions/" + idSegment(sessionId) + "/recovery-decisions", {
      method: "POST", cache: "no-store",
      headers: authHeaders({ "Content-Type": "application/json", "Idempotency-Key": idem }),
      body: JSON.stringify(body),
    });
    status = r.status;
    answer = await r.json().catch(() => ({}));
  } catch (err) {
    answer = { message: "the server did not answer: " + err };
  } finally {
    $("send").disabled = false;
  }
  const box = $("result");
  box.hidden = false;
  // A repeat of this form (its key) gets the first receipt: "already accepted (line N)", N the first one's line.
  const repeat = (r) => (r && r.replayed ? " (line " + r.first_line + ")" : "");
  const sentAgain = (r) => (r && r.replayed ? "; this form was sent before: its first receipt, nothing changed"
    + " (this send is recorded at line " + r.line + ")" : "");
  if (status === 200) {
    box.dataset.code = answer.replayed ? "already-accepted" : "accepted";
    setText("result-code", (answer.replayed ? "Already accepted" : "Accepted") + repeat(answer));
    setText("result-message", answer.decision + " at line " + answer.first_line + sentAgain(answer)
      + judgedWithout(answer));
    $("result-receipt").textContent = receiptText(answer);
  } else {
    const receipt = answer.receipt;
    box.dataset.code = answer.code || String(status);
    setText("result-code", (status === 409 ? (receipt && receipt.replayed ? "Already refused: " : "Refused: ")
      : "Error " + status + ": ") + (answer.code || "") + repeat(receipt));
    setText("result-message", (answer.message || "") + judgedWithout(receipt || {}));
    $("result-receipt").textContent = receipt ? receiptText(receipt) : "";
  }
}

// --- start -------------------------------------------------------------------------

function start() {
  if (!key()) return askKey("");
  if (PAGE === "session") {
    live("/v1/sessions/" + idSegment(sessionId), {
      session: renderSession,
      gone: (data) => { fresh(); current(); sessionGone(data.message, true); },
    }, (message) => {
      $("keybox").hidden = true;
      $(MAIN).hidden = false;
      sessionGone(message, false);
    });
  } else {
    live("/v1/status" + (EVERY ? "?all=1" : ""), { status: renderStatus });
  }
}

$("keybox").addEventListener("submit", (event) => {
  event.preventDefault();
  const typed = $("key").value.trim();
  $("key").value = "";
  const refused = keyProblem(typed);
  if (refused !== null) return askKey(refused);
  sessionStorage.setItem(KEY, typed);
  start();
});
$("forget").addEventListener("click", () => {
  sessionStorage.removeItem(KEY);
  location.reload();
});
if (PAGE === "status") {
  const a = el("a", EVERY ? "show the first few of each group" : "show every item");
  a.href = EVERY ? "/" : "/?all=1";
  $("toggle").append(a);
}
if (PAGE === "session") {
  $("decide").addEventListener("submit", sendDecision);
  for (const id of ["decision", "revision", "turn", "evidence", "reason"]) {
    $(id).addEventListener("input", () => { formHeld = true; showRevisionNow(); });
  }
}
start();
