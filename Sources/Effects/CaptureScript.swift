import EventLog

/// A capture session: URLs fired at the app, waits, system steps, and markers where the
/// state is worth capturing. One instruction per line; a word that begins with `#` starts a
/// comment, as in a shell (so a URL's fragment, `open botmessages://x#y`, stays whole):
///
///     open botmessages://avatar/aria-7/expanded
///     wait 250ms
///     swipe-back
///     capture avatar-expanded messenger
///
/// `open URL` runs the URL's plan with origin `capture`; `wait D` lets D pass (`ms` or `s`)
/// and re-checks a waiting plan; `swipe-back` is the system popping one screen;
/// `capture NAME [PATH]` records the state (or the value at PATH, absent when nothing is
/// there) after the newest event.
public struct CaptureScript: Sendable, Hashable {
    /// One instruction of a script, as the type's summary describes them; a `wait` holds its
    /// duration in microseconds (at most an hour), a `capture` its optional path.
    public enum Instruction: Sendable, Hashable {
        case open(String)
        case wait(microseconds: Int64)
        case swipeBack
        case capture(name: String, path: StatePath?)
    }

    /// An instruction and the line it stands on.
    public struct Line: Sendable, Hashable {
        /// The line's number in the script text, counting from 1.
        public var number: Int
        /// What the line says to do.
        public var instruction: Instruction
    }

    /// The script's instructions in order; blank and comment-only lines are left out.
    public private(set) var lines: [Line] = []

    /// Parses a script; throws with the line number of the first bad line. Parsing checks
    /// the shape only: URLs are routed when they run.
    /// - Throws: `CaptureScriptError` for the first line with an unknown instruction, the
    ///   wrong number of words, a duration that is not a number with `ms` or `s` (or exceeds
    ///   an hour), or a capture path that does not parse.
    public init(parsing text: String) throws(CaptureScriptError) {
        // Any line ending: "\r\n" is one Character in Swift, which a split on "\n" misses.
        for (index, raw) in text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline).enumerated() {
            let number = index + 1
            let words = raw.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\r" })
                .prefix { !$0.hasPrefix("#") }.map(String.init)
            guard let keyword = words.first else { continue }
            func fail(_ reason: String) -> CaptureScriptError { CaptureScriptError(line: number, reason: reason) }
            let instruction: Instruction
            switch keyword {
            case "open":
                guard words.count == 2 else { throw fail("'open' takes one URL") }
                instruction = .open(words[1])
            case "wait":
                guard words.count == 2, let duration = Self.microseconds(words[1]) else {
                    throw fail("'wait' takes one duration of at most an hour, such as 250ms or 1.5s")
                }
                instruction = .wait(microseconds: duration)
            case "swipe-back":
                guard words.count == 1 else { throw fail("'swipe-back' takes nothing") }
                instruction = .swipeBack
            case "capture":
                guard words.count == 2 || words.count == 3 else { throw fail("'capture' takes a name and an optional path") }
                var path: StatePath?
                if words.count == 3 {
                    do { path = try StatePath(parsing: words[2]) } catch { throw fail("path \(words[2]): \(error)") }
                }
                instruction = .capture(name: words[1], path: path)
            default:
                throw fail("unknown instruction '\(keyword)' (expected open, wait, swipe-back or capture)")
            }
            lines.append(Line(number: number, instruction: instruction))
        }
    }

    static func microseconds(_ text: String) -> Int64? {
        let (number, scale): (Substring, Double) =
            text.hasSuffix("ms") ? (text.dropLast(2), 1_000) : text.hasSuffix("s") ? (text.dropLast(), 1_000_000) : ("", 0)
        guard let value = Double(number), value >= 0, value * scale <= 3_600_000_000 else { return nil } // at most an hour
        return Int64(value * scale)
    }
}

/// A script line that could not be parsed.
public struct CaptureScriptError: Error, Hashable, CustomStringConvertible {
    /// The number of the line at fault, counting from 1.
    public let line: Int
    /// What is wrong with it, for people.
    public let reason: String
    public var description: String { "line \(line): \(reason)" }
}

/// What a capture marker recorded.
public struct Capture: Sendable, Hashable {
    /// The name the `capture` instruction gave.
    public var name: String
    /// The seq of the newest event when the capture was taken.
    public var seq: UInt64
    /// The state, or the value at the capture's path; `nil` when nothing was there.
    public var value: StateValue?
}

extension EffectEngine {
    /// Runs a capture script: every URL through the same `run` as taps and links, with origin
    /// `capture`. `plan` routes a URL; `sleep` lets time pass (the real clock in the CLI, a
    /// manual clock in tests). Stops at the first URL that does not route.
    /// - Parameters:
    ///   - plan: Routes an `open` URL to its plan; an error it throws stops the script.
    ///   - sleep: Lets the given number of microseconds pass before a `wait` re-checks a
    ///     waiting plan.
    /// - Returns: What each `capture` instruction recorded, in script order.
    /// - Throws: `CaptureScriptError` with the line number when `plan` cannot route a URL;
    ///   the errors of `run(_:origin:)`, `resume()` and `apply(_:origin:)`. The events of the
    ///   lines before stay appended.
    public func runCapture(_ script: CaptureScript, plan: (String) throws -> Plan<Model.Effect>,
                           sleep: (Int64) -> Void) throws -> [Capture] {
        var captures: [Capture] = []
        for line in script.lines {
            switch line.instruction {
            case .open(let url):
                let planned: Plan<Model.Effect>
                do { planned = try plan(url) } catch { throw CaptureScriptError(line: line.number, reason: "\(error)") }
                try run(planned, origin: .capture)
            case .wait(let microseconds):
                sleep(microseconds)
                try resume()
            case .swipeBack:
                try apply(.pop, origin: .system)
            case .capture(let name, let path):
                let seq = try store.lastSeq()
                let state = try store.snapshot(after: seq)
                captures.append(Capture(name: name, seq: seq, value: path.map { state[$0] } ?? state))
            }
        }
        return captures
    }
}
