import EventLog

/// The page `view` writes: the log's data as JSON in a `<script type="application/json">`,
/// and the CSS and script that build the page from it with `textContent` alone, so no
/// recorded string is ever parsed as HTML or run.
///
/// The contract a test can hold the page to (docs/cli.md, "The page's contract"): each event's
/// row has `data-seq="N"`, each lane `data-path="PATH"`, the row of the `--where` answer
/// `data-bisect="first-bad"`, and the first difference of `--against` or `--replay`
/// `data-diverges="true"`.
enum ViewPage {
    /// The page's data: the range shown and asked for, the state before it, and each event
    /// with its writes (their paths also as keys and indices, for the script to apply them).
    static func data(of store: EventStore, _ shown: ClosedRange<UInt64>, asked: ClosedRange<UInt64>, database: String) throws -> StateObject {
        var events: [StateValue] = []
        events.reserveCapacity(Int(shown.count))
        try store.forEachRecord(from: shown.lowerBound, to: shown.upperBound) { record in
            events.append(event(record))
            return true
        }
        let (first, last) = (try store.firstSeq() ?? 1, try store.lastSeq())
        var narrow = "\(Program.name) view --from N --to M"
        if shown != asked { narrow += " (at most \(ViewCommand.eventLimit) events a page)" }
        return [
            "asked": [.int(Int64(asked.lowerBound)), .int(Int64(asked.upperBound))],
            "control": .string(controlPattern),
            "database": .string(database),
            "events": .array(events),
            "initial": try store.snapshot(after: shown.lowerBound - 1),
            "log": [.int(Int64(first)), .int(Int64(last))],
            "narrow": .string(narrow),
            "shown": [.int(Int64(shown.lowerBound)), .int(Int64(shown.upperBound))],
        ]
    }

    /// One event as the page reads it; `label` and `detail` are the text `eventlog log` prints.
    static func event(_ record: EventRecord) -> StateValue {
        let event = record.event
        var object: StateObject = [
            "detail": .string(Render.detail(event)),
            "label": .string(Render.stepName(event)),
            "origin": .string(event.origin.rawValue),
            "outcome": .string(event.outcome.name),
            "seq": .int(Int64(record.seq)),
            "stream": .string(event.stream),
            "time": .string(record.time.description),
            "writes": .array(event.writes.map { write in
                var object = write.jsonValue.objectValue ?? StateObject()
                object["keys"] = .array(write.path.components.map { component in
                    switch component {
                    case .key(let key): .string(key)
                    case .index(let index): .int(Int64(index))
                    }
                })
                return .object(object)
            }),
        ]
        if case .skipped(let reason) = event.outcome { object["reason"] = .string(reason) }
        if let cause = event.cause { object["cause"] = ["id": .string(cause.id), "source": .string(cause.source), "step": .int(Int64(cause.step))] }
        return .object(object)
    }

    /// ``Render/controlScalars`` as a regular expression's character class (for the `u` flag):
    /// the page writes them as escapes, as the command line does.
    static let controlPattern = "[" + Render.controlScalars.map { range in
        "\\u{\(String(range.lowerBound, radix: 16))}" + (range.count == 1 ? "" : "-\\u{\(String(range.upperBound, radix: 16))}")
    }.joined() + "]"

    /// The page for `data`. It loads nothing, unless `live`: then it may connect back to where
    /// it came from, for the events of `view --serve`.
    static func html(data: StateValue, live: Bool = false) -> String {
        head(policy: "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'" + (live ? "; connect-src 'self'" : ""))
            + scriptSafe(data.json()) + tail
    }

    /// JSON that cannot end the script element holding it, nor open a comment or another
    /// element: `<`, `>` and `&` (and the line and paragraph separators, which some readers
    /// take as line ends) written as `\uXXXX` escapes. They only occur inside strings, where
    /// the escape means the same character.
    static func scriptSafe(_ json: String) -> String {
        var out = ""
        out.reserveCapacity(json.utf8.count)
        for scalar in json.unicodeScalars {
            switch scalar {
            case "<": out += "\\u003C"
            case ">": out += "\\u003E"
            case "&": out += "\\u0026"
            case "\u{2028}": out += "\\u2028"
            case "\u{2029}": out += "\\u2029"
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    private static func head(policy: String) -> String { """
        <!DOCTYPE html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta http-equiv="Content-Security-Policy" content="\(policy)">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>eventlog view</title>
        <style>
        \(style)
        </style>
        </head>
        <body>
        <header>
          <h1 id="title">eventlog view</h1>
          <p id="range"></p>
          <div id="markers"></div>
        </header>
        <nav id="controls">
          <button id="previous" type="button" title="previous event (←)">◀</button>
          <input id="scrubber" type="range" min="0" max="0" value="0" aria-label="event">
          <button id="next" type="button" title="next event (→)">▶</button>
          <span id="position"></span>
          <input id="search" type="search" placeholder="search paths and values" aria-label="search paths and values">
        </nav>
        <section id="results" hidden></section>
        <section id="lanes" aria-label="a lane per state path"><div id="cursor"></div></section>
        <main>
          <section id="timeline" aria-label="events"></section>
          <aside id="detail">
            <div id="event"></div>
            <h2 id="state-title">state</h2>
            <div id="state"></div>
          </aside>
        </main>
        <script type="application/json" id="eventlog-data">
        """ }

    private static let tail = """
        </script>
        <script>
        \(script)
        </script>
        </body>
        </html>

        """

    private static let style = """
        :root { --name: 18rem; font: 13px/1.4 system-ui, sans-serif; color: #1d2329; background: #f6f7f9; }
        body { margin: 0; }
        header { padding: .6rem 1rem .2rem; }
        h1 { font-size: 1.1rem; margin: 0; }
        h2 { font-size: .95rem; margin: .8rem 0 .3rem; }
        #range { margin: .2rem 0; color: #55606b; }
        .marker { margin: .3rem 0; padding: .3rem .5rem; border-left: 4px solid #c62828; background: #fff; cursor: pointer; }
        .marker.against, .marker.replay { border-color: #6a1b9a; }
        .side-by-side { display: grid; grid-template-columns: 1fr 1fr; gap: .5rem; }
        nav { display: flex; gap: .4rem; align-items: center; padding: .3rem 1rem; background: #e9ecef; position: sticky; top: 0; z-index: 2; }
        #scrubber { flex: 1; }
        #search { width: 18rem; }
        #results { margin: .3rem 1rem; background: #fff; padding: .3rem .6rem; max-height: 12rem; overflow: auto; }
        #results ol { margin: 0; padding-left: 1.5rem; font: 12px ui-monospace, monospace; }
        #results li { cursor: pointer; }
        #lanes { position: relative; margin: .4rem 1rem; background: #fff; max-height: 19rem; overflow-x: hidden; overflow-y: auto; }
        .lane { display: flex; height: 18px; border-bottom: 1px solid #eef0f2; }
        .lane-name { width: var(--name); flex: none; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; padding: 0 .4rem; font: 12px ui-monospace, monospace; }
        .lane-track { position: relative; flex: 1; contain: strict; }
        .tick { position: absolute; top: 3px; width: 3px; height: 12px; margin-left: -1px; background: #1565c0; cursor: pointer; }
        .tick.current { background: #ff8f00; top: 1px; height: 16px; }
        .lane.paired { height: 26px; }
        .lane-tracks { flex: 1; display: flex; flex-direction: column; }
        .lane-tracks .lane-track { height: 13px; }
        .lane-track.other { background: #f6f3fa; }
        .lane-tracks .tick { top: 1px; height: 11px; }
        .tick.other { background: #6a1b9a; }
        .tick.differs { background: #c62828; }
        #cursor { position: absolute; top: 0; bottom: 0; width: 1px; background: #ff8f00; pointer-events: none; z-index: 1; }
        main { display: grid; grid-template-columns: minmax(0, 3fr) minmax(0, 2fr); gap: .6rem; padding: 0 1rem 1rem; }
        #timeline { background: #fff; max-height: 70vh; overflow: auto; font: 12px ui-monospace, monospace; }
        .plan { border-bottom: 1px solid #dde1e5; }
        /* Off-screen plans are not laid out: selecting stays quick with 20,000 rows. */
        .plan, #timeline > .row, #timeline > details { content-visibility: auto; contain-intrinsic-size: auto 54px; }
        .plan-head { padding: .2rem .4rem; background: #f0f3f6; color: #37474f; white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
        .row { display: grid; grid-template-columns: 4.5rem 7.5rem 5.5rem minmax(8rem, 1fr) minmax(0, 2fr); gap: .4rem; padding: 1px .4rem; cursor: pointer; white-space: nowrap; }
        .row > span { overflow: hidden; text-overflow: ellipsis; }
        .row:hover { background: #f1f5fb; }
        .row.selected { background: #fff3e0; outline: 1px solid #ff8f00; }
        .row[data-bisect] { border-left: 4px solid #c62828; }
        .row[data-diverges] { border-right: 4px solid #6a1b9a; }
        .seq { text-align: right; color: #78909c; }
        .origin { border-radius: 3px; padding: 0 .3rem; color: #fff; background: hsl(var(--hue, 200) 45% 42%); }
        .applied .outcome { color: #2e7d32; }
        .skipped .outcome { color: #b26a00; }
        .cancelled .outcome { color: #c62828; }
        .cancelled .label { text-decoration: line-through; }
        details.noops > summary { padding: 1px .4rem; color: #78909c; cursor: pointer; }
        #detail { background: #fff; padding: .4rem .6rem; max-height: 70vh; overflow: auto; }
        #event dl { display: grid; grid-template-columns: 5rem 1fr; margin: 0; gap: 0 .5rem; }
        #event dt { color: #78909c; }
        #event dd { margin: 0; overflow-wrap: anywhere; }
        .write { font: 12px ui-monospace, monospace; background: #fff3e0; margin: 1px 0; padding: 0 .3rem; overflow-wrap: anywhere; }
        #state { font: 12px ui-monospace, monospace; }
        #state details { margin-left: 1rem; }
        #state summary { margin-left: -1rem; cursor: pointer; }
        #state .leaf { margin-left: 1rem; overflow-wrap: anywhere; }
        #state .key { color: #6a1b9a; }
        #state .written > summary, #state .leaf.written { background: #ffe0b2; }
        """

    private static let script = """
        "use strict";
        (function () {
          const data = JSON.parse(document.getElementById("eventlog-data").textContent);
          const control = new RegExp(data.control, "gu");
          const events = data.events;
          const first = data.shown[0];
          const $ = (id) => document.getElementById(id);

          // Recorded text as eventlog prints it: control characters and bidi marks as escapes.
          function shown(text) {
            return String(text).replace(control, (c) => c === "\\n" ? "\\\\n" : c === "\\r" ? "\\\\r" : c === "\\t" ? "\\\\t"
              : "\\\\u{" + c.codePointAt(0).toString(16).toUpperCase() + "}");
          }
          function element(tag, className, text) {
            const node = document.createElement(tag);
            if (className) node.className = className;
            if (text !== undefined) node.textContent = shown(text);
            return node;
          }
          function brief(value, limit) {
            const text = value === undefined ? "(absent)" : JSON.stringify(value);
            return text.length > limit ? text.slice(0, limit - 1) + "…" : text;
          }
          function own(container, key) { return Object.prototype.hasOwnProperty.call(container, key) ? container[key] : undefined; }
          function isContainer(value) { return value !== null && typeof value === "object"; }
          // A path as eventlog writes it: bare keys joined by dots, others as ["…"], indices as [N].
          function pathText(keys) {
            let text = "";
            for (const key of keys) {
              if (typeof key === "number") text += "[" + key + "]";
              else if (key !== "" && !/[.\\[\\]" ()!=<>&|\\s\\u0000-\\u001f\\u007f]/u.test(key)) text += (text ? "." : "") + key;
              else text += "[" + JSON.stringify(key) + "]";
            }
            return text || "(root)";
          }
          function writeText(write) { return write.path + ": " + brief(write.old, 60) + " → " + brief(write.new, 60); }

          // States: the one before the range, then each event's writes applied without changing
          // an earlier state (only the containers on a write's path are copied).
          function applied(state, keys, depth, write) {
            if (depth === keys.length) return "new" in write ? write.new : undefined;
            const key = keys[depth];
            if (!isContainer(state) && !("new" in write)) return state; // removing under nothing changes nothing
            const container = isContainer(state) ? state : (typeof key === "number" ? [] : {});
            // Spread defines keys (even "__proto__") where assigning them could set a prototype.
            const copy = Array.isArray(container) ? container.slice() : { ...container };
            const value = applied(own(container, key), keys, depth + 1, write);
            if (value === undefined) {
              if (Array.isArray(copy)) copy.splice(key, 1); else delete copy[key];
            } else {
              Object.defineProperty(copy, key, { value, writable: true, enumerable: true, configurable: true });
            }
            return copy;
          }
          const checkpointEvery = 256;
          const checkpoints = [data.initial];
          function stateAfter(index) {
            if (index < 0) return data.initial;
            let at = Math.min(Math.floor((index + 1) / checkpointEvery), checkpoints.length - 1);
            let state = checkpoints[at];
            for (let i = at * checkpointEvery; i <= index; i++) {
              for (const write of events[i].writes) state = applied(state, write.keys, 0, write);
              if ((i + 1) % checkpointEvery === 0 && checkpoints.length === (i + 1) / checkpointEvery) checkpoints.push(state);
            }
            return state === undefined ? null : state;
          }

          // The timeline: rows grouped by plan, runs of no-op skips folded; a live event joins it the same way.
          const rows = [];
          const timeline = $("timeline");
          const isNoOp = (event) => event.outcome === "skipped" && String(event.reason).startsWith("no-op");
          function hue(origin) {
            let hash = 0;
            for (const c of origin) hash = (hash * 31 + c.codePointAt(0)) % 360;
            return hash;
          }
          function row(event, index) {
            const node = element("div", "row " + (["applied", "skipped", "cancelled"].includes(event.outcome) ? event.outcome : ""));
            node.setAttribute("data-seq", String(event.seq));
            node.dataset.index = String(index);
            const origin = element("span", "origin", event.origin);
            origin.style.setProperty("--hue", String(hue(event.origin)));
            node.append(element("span", "seq", event.seq), origin, element("span", "outcome", event.outcome),
              element("span", "label", event.stream + "/" + event.label), element("span", "detail", event.detail));
            node.title = shown(event.time + (event.cause ? "  " + event.cause.id + " step " + event.cause.step : ""));
            rows[index] = node;
            return node;
          }
          let group = null;
          function addRow(index) {
            const event = events[index];
            const cause = event.cause ? event.cause.id : null;
            if (group === null || cause === null || group.cause !== cause) {
              let parent = timeline;
              if (cause !== null) {
                parent = element("section", "plan");
                parent.append(element("div", "plan-head", cause + (event.cause.source ? "  " + event.cause.source : "") + "  (" + event.origin + ")"));
                timeline.append(parent);
              }
              group = { cause, parent, fold: null };
            }
            if (!isNoOp(event)) {
              group.fold = null;
              group.parent.append(row(event, index));
              return;
            }
            if (group.fold === null) {
              group.fold = { folded: element("details", "noops"), summary: element("summary"), count: 0 };
              group.fold.folded.append(group.fold.summary);
              group.parent.append(group.fold.folded);
            }
            group.fold.folded.append(row(event, index));
            group.fold.count++;
            group.fold.summary.textContent = group.fold.count + (group.fold.count === 1 ? " no-op skip" : " no-op skips");
          }
          events.forEach((_, index) => addRow(index));

          // The header: the range, and what --where, --against and --replay found.
          let [askedFrom, askedTo] = data.asked;
          document.title = shown("eventlog view: " + data.database + " " + first + "-" + data.shown[1]);
          $("title").textContent = shown(data.database);
          function describeRange() {
            $("range").textContent = "Events " + first + "-" + data.shown[1] + " (" + events.length + ") of the log's " + data.log[0] + "-" + data.log[1]
              + (askedFrom === first && askedTo === data.shown[1] ? "" : "; " + askedFrom + "-" + askedTo + " was asked for")
              + ". Narrow with " + data.narrow + "." + (data.live ? " Live: events join as they commit." : "");
          }
          describeRange();
          const markers = $("markers");
          function marker(kind, seq, text, extra) {
            const node = element("div", "marker " + kind, text);
            if (extra) node.append(extra);
            if (seq !== null && seq >= first && seq <= data.shown[1]) node.addEventListener("click", () => select(seq - first, true));
            markers.append(node);
            return node;
          }
          function writesBlock(writes) {
            const block = element("div");
            if (writes.length === 0) block.append(element("div", "write", "(no writes)"));
            for (const write of writes) block.append(element("div", "write", writeText(write)));
            return block;
          }
          // First selected: the marked event, else #seq=N, else the first (live: the newest).
          let initialIndex = data.live ? events.length - 1 : 0;
          function mark(seq, attribute, value) {
            if (seq === null || seq < first || seq > data.shown[1]) return;
            rows[seq - first].setAttribute(attribute, value);
            initialIndex = seq - first;
          }
          if (data.replay) {
            const seq = data.replay.seq;
            if (seq === null) marker("replay", null, "--replay: today's code agrees with every recomputed event in range");
            else {
              const sides = element("div", "side-by-side");
              const recorded = element("div", "", "recorded (" + data.replay.recordedOutcome + ")");
              recorded.append(writesBlock(data.replay.recorded));
              const recomputed = element("div", "", "today's code (" + data.replay.recomputedOutcome + ")");
              recomputed.append(writesBlock(data.replay.recomputed));
              sides.append(recorded, recomputed);
              marker("replay", seq, "--replay: today's code first disagrees at event " + seq, sides);
              mark(seq, "data-diverges", "true");
            }
          }
          if (data.against) {
            const seq = data.against.seq;
            if (seq === null) marker("against", null, "--against " + data.against.database + ": the states agree after every event in range");
            else {
              marker("against", seq, "--against " + data.against.database + ": the states first differ after event " + seq
                + (seq < first ? " (before the range)" : "") + " (each lane: this log above, the other below, a red tick where they wrote differently); this log's state → the other's:",
                writesBlock(data.against.diff));
              mark(seq, "data-diverges", "true");
            }
          }
          if (data.bisect) {
            const seq = data.bisect.firstBad;
            marker("bisect", seq, seq === null ? "--where " + data.bisect.where + ": holds after no event in range"
              : "--where " + data.bisect.where + ": first holds after event " + seq);
            mark(seq, "data-bisect", "first-bad");
          }

          // The URL's fragment: #seq=N selects an event (#search=TEXT runs a search, below).
          const fragment = new URLSearchParams(location.hash.slice(1));
          if (fragment.has("seq")) initialIndex = Math.max(0, Math.min(events.length - 1, Number(fragment.get("seq")) - first)) || 0;

          // A lane per path written in range (at most 400), a tick per write.
          const lanes = $("lanes");
          const lanesNote = element("div", "lane-name");
          lanes.append(lanesNote);
          const tracks = new Map();
          // With --against, each lane is two tracks aligned by seq: this log's, and the other's.
          const paired = Boolean(data.against);
          const otherTracks = new Map();
          const ticks = [];
          const ticksByIndex = new Map();
          const leftOut = new Set();
          const laneLimit = 400;
          const position = (index) => events.length > 1 ? index / (events.length - 1) : 0.5;
          function trackFor(path) {
            if (tracks.has(path)) return tracks.get(path);
            if (tracks.size >= laneLimit) { leftOut.add(path); return null; }
            const lane = element("div", "lane");
            lane.setAttribute("data-path", path);
            const name = element("div", "lane-name", path);
            name.title = shown(path);
            const track = element("div", "lane-track");
            if (paired) {
              lane.classList.add("paired");
              const other = element("div", "lane-track other");
              other.setAttribute("data-log", "against");
              const both = element("div", "lane-tracks");
              both.append(track, other);
              lane.append(name, both);
              otherTracks.set(path, other);
            } else {
              lane.append(name, track);
            }
            lanes.insertBefore(lane, lanesNote);
            tracks.set(path, track);
            return track;
          }
          // Whether the other log wrote `write`'s path to another value at the same event, or not at all.
          const otherWrites = (index) => (paired && data.against.writes[index]) || [];
          const writesDiffer = (write, writes) => !writes.some((other) => other.path === write.path && JSON.stringify(other.new) === JSON.stringify(write.new));
          function addTicks(index) {
            for (const write of events[index].writes) {
              const track = trackFor(write.path);
              if (track === null) continue;
              const tick = element("span", "tick" + (paired && writesDiffer(write, otherWrites(index)) ? " differs" : ""));
              tick.style.left = (position(index) * 100).toFixed(3) + "%";
              tick.title = shown(events[index].seq + ": " + brief(write.old, 80) + " → " + brief(write.new, 80));
              tick.dataset.index = String(index);
              track.append(tick);
              ticks.push(tick);
              if (!ticksByIndex.has(index)) ticksByIndex.set(index, []);
              ticksByIndex.get(index).push(tick);
            }
            for (const write of otherWrites(index)) {
              if (trackFor(write.path) === null) continue;
              const tick = element("span", "tick other" + (writesDiffer(write, events[index].writes) ? " differs" : ""));
              tick.style.left = (position(index) * 100).toFixed(3) + "%";
              tick.title = shown("the other log, " + events[index].seq + ": " + brief(write.old, 80) + " → " + brief(write.new, 80));
              tick.dataset.index = String(index);
              otherTracks.get(write.path).append(tick);
            }
          }
          function describeLanes() {
            lanesNote.textContent = tracks.size === 0 ? "no event in range wrote anything"
              : leftOut.size > 0 ? leftOut.size + " more paths have no lane: narrow the range" : "";
          }
          // The lanes of the paths the first selected event wrote (the marked one) come first, then by path.
          const focus = new Set((events[initialIndex] ? events[initialIndex].writes : []).map((write) => String(write.keys[0])));
          const topKey = new Map();
          events.forEach((event, index) => event.writes.concat(otherWrites(index)).forEach((write) => {
            if (!topKey.has(write.path)) topKey.set(write.path, String(write.keys[0]));
          }));
          [...topKey.keys()].sort((a, b) => {
            const [fa, fb] = [a, b].map((path) => focus.has(topKey.get(path)) ? 0 : 1);
            return fa - fb || (a < b ? -1 : a > b ? 1 : 0);
          }).forEach(trackFor);
          events.forEach((_, index) => addTicks(index));
          describeLanes();

          // The selected event: its row, its ticks, its record and the state after it.
          const scrubber = $("scrubber");
          scrubber.max = String(Math.max(0, events.length - 1));
          let selected = -1;
          function stateTree(value, keys, written, open) {
            const id = JSON.stringify(keys);
            const label = keys.length ? shown(String(keys[keys.length - 1])) + ": " : "";
            if (!isContainer(value) || Object.keys(value).length === 0) {
              const leaf = element("div", "leaf" + (written.exact.has(id) ? " written" : ""));
              leaf.append(element("span", "key", label), document.createTextNode(shown(brief(value, 400))));
              return leaf;
            }
            const node = element("details", written.exact.has(id) ? "written" : "");
            const size = Object.keys(value).length;
            const summary = element("summary");
            summary.append(element("span", "key", label), document.createTextNode(Array.isArray(value) ? "[" + size + "]" : "{" + size + "}"));
            node.append(summary);
            let filled = false;
            const fill = () => {
              if (filled) return;
              filled = true;
              for (const key of Object.keys(value)) {
                const child = Array.isArray(value) ? Number(key) : key;
                const childKeys = keys.concat([child]);
                node.append(stateTree(value[key], childKeys, written, written.around.has(JSON.stringify(childKeys))));
              }
            };
            node.addEventListener("toggle", fill);
            if (open) { node.open = true; fill(); }
            return node;
          }
          function select(index, reveal) {
            if (events.length === 0) return;
            const began = performance.now();
            index = Math.max(0, Math.min(events.length - 1, index));
            if (selected >= 0) {
              rows[selected].classList.remove("selected");
              for (const tick of ticksByIndex.get(selected) || []) tick.classList.remove("current");
            }
            selected = index;
            const event = events[index];
            const node = rows[index];
            node.classList.add("selected");
            const folded = node.closest("details");
            if (folded) folded.open = true;
            if (reveal) {
              // Scrolls the timeline alone, not the page around it.
              const top = node.getBoundingClientRect().top - timeline.getBoundingClientRect().top + timeline.scrollTop;
              if (top < timeline.scrollTop || top + node.offsetHeight > timeline.scrollTop + timeline.clientHeight) {
                timeline.scrollTop = top - timeline.clientHeight / 3;
              }
            }
            for (const tick of ticksByIndex.get(index) || []) tick.classList.add("current");
            scrubber.value = String(index);
            $("position").textContent = "event " + event.seq + " (" + (index + 1) + " of " + events.length + ")";
            const cursor = $("cursor");
            cursor.style.left = "calc(var(--name) + (100% - var(--name)) * " + position(index) + ")";
            cursor.style.height = lanes.scrollHeight + "px";

            const record = $("event");
            record.replaceChildren();
            const fields = element("dl");
            const field = (name, value) => fields.append(element("dt", "", name), element("dd", "", value));
            field("seq", event.seq);
            field("time", event.time);
            field("event", event.stream + "/" + event.label);
            field("origin", event.origin);
            field("outcome", event.outcome + (event.reason !== undefined ? ": " + event.reason : ""));
            if (event.cause) field("cause", event.cause.id + " step " + event.cause.step + (event.cause.source ? " (" + event.cause.source + ")" : ""));
            record.append(fields, element("h2", "", event.writes.length ? "writes" : "no writes"));
            for (const write of event.writes) record.append(element("div", "write", writeText(write)));

            const written = { exact: new Set(), around: new Set(["[]"]) };
            for (const write of event.writes) {
              written.exact.add(JSON.stringify(write.keys));
              for (let depth = 0; depth < write.keys.length; depth++) written.around.add(JSON.stringify(write.keys.slice(0, depth)));
            }
            $("state-title").textContent = "state after " + event.seq;
            $("state").replaceChildren(stateTree(stateAfter(index), [], written, true));
            document.body.dataset.selected = String(event.seq);
            document.body.dataset.selectMs = (performance.now() - began).toFixed(1);
          }
          timeline.addEventListener("click", (e) => {
            const node = e.target.closest(".row");
            if (node) select(Number(node.dataset.index), false);
          });
          lanes.addEventListener("click", (e) => { if (e.target.classList.contains("tick")) select(Number(e.target.dataset.index), true); });
          scrubber.addEventListener("input", () => select(Number(scrubber.value), true));
          $("previous").addEventListener("click", () => select(selected - 1, true));
          $("next").addEventListener("click", () => select(selected + 1, true));
          document.addEventListener("keydown", (e) => {
            if (e.target instanceof HTMLInputElement && e.target.type === "search") return;
            const step = { ArrowLeft: -1, ArrowUp: -1, ArrowRight: 1, ArrowDown: 1 }[e.key];
            if (step === undefined) return;
            e.preventDefault();
            select(selected + step, true);
          });

          // Search: where each path whose text or value holds the query first appears in range.
          const results = $("results");
          function search(query) {
            const wanted = query.trim().toLowerCase();
            results.replaceChildren();
            results.hidden = wanted === "";
            if (results.hidden) return;
            const found = new Map();
            function visit(value, keys, index) {
              if (isContainer(value) && Object.keys(value).length > 0) {
                for (const key of Object.keys(value)) visit(value[key], keys.concat([Array.isArray(value) ? Number(key) : key]), index);
                return;
              }
              const path = pathText(keys);
              if (found.has(path)) return;
              const text = JSON.stringify(value);
              if (path.toLowerCase().includes(wanted) || text.toLowerCase().includes(wanted)) found.set(path, { index, path, text });
            }
            visit(data.initial, [], -1);
            events.forEach((event, index) => event.writes.forEach((write) => { if ("new" in write) visit(write.new, write.keys, index); }));
            const list = [...found.values()].sort((a, b) => a.index - b.index);
            results.append(element("div", "", list.length === 0 ? "no path or value in range holds \\"" + query.trim() + "\\""
              : list.length + (list.length === 1 ? " path holds" : " paths hold") + " \\"" + query.trim() + "\\"; where each first appears:"));
            const ordered = element("ol");
            for (const hit of list.slice(0, 500)) {
              const seq = hit.index < 0 ? first - 1 : events[hit.index].seq;
              const item = element("li", "", (hit.index < 0 ? "before " + first : "event " + seq) + "  " + hit.path + " = " + (hit.text.length > 120 ? hit.text.slice(0, 119) + "…" : hit.text));
              item.setAttribute("data-result-seq", String(seq));
              item.addEventListener("click", () => select(Math.max(0, hit.index), true));
              ordered.append(item);
            }
            results.append(ordered);
          }
          const searchBox = $("search");
          searchBox.addEventListener("input", () => search(searchBox.value));

          if (fragment.has("search")) { searchBox.value = fragment.get("search"); search(searchBox.value); }
          select(initialIndex, true);

          // Served live (view --serve): each event committed after the page's joins it; the
          // newest stays selected when it was.
          if (data.live) {
            let placing = false;
            const stream = new EventSource("events?after=" + data.live.after);
            stream.onmessage = (message) => {
              const event = JSON.parse(message.data);
              const following = selected === events.length - 1;
              if (askedTo === data.shown[1]) askedTo = event.seq;
              events.push(event);
              data.shown[1] = event.seq;
              data.log[1] = Math.max(data.log[1], event.seq);
              addRow(events.length - 1);
              addTicks(events.length - 1);
              scrubber.max = String(events.length - 1);
              describeRange();
              describeLanes();
              if (following) select(events.length - 1, true);
              if (!placing) {
                placing = true;
                requestAnimationFrame(() => {
                  placing = false;
                  for (const tick of ticks) tick.style.left = (position(Number(tick.dataset.index)) * 100).toFixed(3) + "%";
                });
              }
            };
          }
          // Milliseconds since the navigation started: the page built (its first selection laid out).
          document.body.dataset.buildMs = performance.now().toFixed(1);
          requestAnimationFrame(() => requestAnimationFrame(() => {
            const paint = performance.getEntriesByName("first-contentful-paint")[0];
            if (paint) document.body.dataset.firstPaintMs = paint.startTime.toFixed(1);
            document.body.dataset.loadMs = performance.now().toFixed(1);
          }));
        })();
        """
}
