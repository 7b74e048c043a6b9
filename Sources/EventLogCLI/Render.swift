import EventLog

/// Text for people: short, aligned, one event per line.
public enum Render {
    /// A value in compact JSON, cut to `limit` characters.
    public static func value(_ value: StateValue?, limit: Int = 48) -> String {
        guard let value else { return "(absent)" }
        let text = value.json()
        return text.count > limit ? String(text.prefix(limit - 1)) + "…" : text
    }

    static func path(_ path: StatePath) -> String { path.isRoot ? "(root)" : path.description }

    package static func write(_ write: Write) -> String {
        "\(path(write.path)): \(value(write.old)) → \(value(write.new))"
    }

    /// `   12  2026-11-30T02:05:40.123Z  url          applied   messenger/clearListFilter  listFilter: "bots" → null`
    package static func logLine(_ record: EventRecord, colors: Bool = false) -> String {
        let event = record.event
        let detail = detail(event)
        let outcome = column(event.outcome.name, 9)
        return seq(record)
            + "  " + shortTime(record.time)
            + "  " + column(escaped(event.origin.rawValue), 12)
            + (colors ? paint(outcome, event.outcome.name) : outcome)
            + "\(escaped(event.stream))/\(stepName(event))" + (event.version == 1 ? "" : " v\(event.version)")
            + (detail.isEmpty ? "" : "  " + detail)
    }

    /// One step of a plan's trace: `     14  1  scrollToAvatarRow(aria-7)  applied    messenger.avatarScrollTarget: null → "aria-7"`.
    public static func traceLine(_ record: EventRecord) -> String {
        let event = record.event
        return seq(record)
            + "  " + column(String(event.cause?.step ?? 0), 2)
            + column(stepName(event), 35)
            + " " + column(event.outcome.name, 9)
            + detail(event)
    }

    /// What an event did: its writes, why it was skipped, or that it was cancelled.
    static func detail(_ event: Event) -> String {
        switch event.outcome {
        case .applied: event.writes.map(write).joined(separator: "; ")
        case .skipped(let reason): escaped(reason)
        case .cancelled: "superseded by a newer plan" + (event.cause.map { " (during \(escaped($0.id)))" } ?? "")
        }
    }

    /// `text` padded to `width` and one space more: never cut, always apart from what follows.
    package static func column(_ text: String, _ width: Int) -> String {
        text + String(repeating: " ", count: max(0, width - text.count) + 1)
    }

    /// The seq, right-aligned in seven columns.
    private static func seq(_ record: EventRecord) -> String {
        let seq = String(record.seq)
        return String(repeating: " ", count: max(0, 7 - seq.count)) + seq
    }

    /// `expandAvatar(aria-7)`: the event type and its payload's values.
    package static func stepName(_ event: Event) -> String {
        guard case .object(let arguments) = event.payload, !arguments.isEmpty, event.type != "planStarted" else { return escaped(event.type) }
        return escaped(event.type + "(" + StateValue.object(arguments).argumentWords.joined(separator: ", ") + ")")
    }

    /// `text` with its control characters (C0, DEL, C1, line and paragraph separators, and
    /// the marks and overrides of bidirectional text) written as escapes (`\n`, `\u{1B}`,
    /// `\u{202E}`), so that no recorded string can forge lines, drive the terminal or reorder
    /// what is shown around it. Every recorded string in human output goes through it.
    public static func escaped(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: isControl) else { return text }
        var out = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where isControl(scalar): out += "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    package static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        controlScalars.contains { $0.contains(scalar.value) }
    }

    /// The scalars ``escaped(_:)`` writes as escapes: C0, DEL, C1, the line and paragraph
    /// separators, and the bidirectional marks, embeddings, overrides and isolates. The page
    /// of `view` escapes the same ones.
    package static let controlScalars: [ClosedRange<UInt32>] = [
        0...0x1F, 0x7F...0x9F, 0x2028...0x2029,
        0x061C...0x061C, 0x200E...0x200F, 0x202A...0x202E, 0x2066...0x2069,
    ]

    /// RFC 3339 to the millisecond.
    static func shortTime(_ time: Timestamp) -> String {
        let full = time.description
        return String(full.prefix(23)) + "Z"
    }

    /// A diff as lines: `~ path: old → new`, `+ path: new`, `- path: old`.
    static func diff(_ writes: [Write], colors: Bool = false) -> [String] {
        writes.map { write in
            switch (write.old, write.new) {
            case (nil, let new?): paint("+ \(path(write.path)): \(value(new, limit: 120))", colors ? "added" : nil)
            case (let old?, nil): paint("- \(path(write.path)): \(value(old, limit: 120))", colors ? "removed" : nil)
            default: paint("~ \(path(write.path)): \(value(write.old, limit: 60)) → \(value(write.new, limit: 60))", colors ? "changed" : nil)
            }
        }
    }

    /// `text` in the colour of `kind` (an outcome's name, or added, removed, changed); as it
    /// is when `kind` is `nil` or has no colour.
    static func paint(_ text: String, _ kind: String?) -> String {
        let code: String? = switch kind {
        case "applied", "added": "32"      // green
        case "skipped", "changed": "33"    // yellow
        case "cancelled", "removed": "31"  // red
        default: nil
        }
        return code.map { "\u{1B}[\($0)m\(text)\u{1B}[0m" } ?? text
    }

    /// `text` cut to `width` columns, the last one `…`, when it is wider; colour escapes
    /// (`ESC [ … m`) take no column, and a cut line ends with a reset.
    static func fitted(_ text: String, width: Int) -> String {
        var visible = 0
        var inEscape = false
        for character in text {
            if inEscape { inEscape = character != "m" } else if character == "\u{1B}" { inEscape = true } else { visible += 1 }
        }
        guard visible > width else { return text }
        var out = ""
        var columns = 0
        inEscape = false
        for character in text {
            if inEscape {
                inEscape = character != "m"
            } else if character == "\u{1B}" {
                inEscape = true
            } else {
                guard columns < width - 1 else { break }
                columns += 1
            }
            out.append(character)
        }
        return out + "…" + (text.contains("\u{1B}") ? "\u{1B}[0m" : "")
    }

    /// Bytes for people: `1.2 MiB (1,234,567 bytes)`.
    static func bytes(_ count: Int) -> String {
        let units = ["bytes", "KiB", "MiB", "GiB", "TiB"]
        var size = Double(count)
        var unit = 0
        while size >= 1024 && unit < units.count - 1 {
            size /= 1024
            unit += 1
        }
        return unit == 0 ? "\(count) bytes" : "\((size * 10).rounded() / 10) \(units[unit]) (\(count) bytes)"
    }

    /// `text`, or its start and end around `… (N more characters) …` when it is longer than `limit`.
    static func shortened(_ text: String, to limit: Int) -> String {
        guard text.count > limit else { return text }
        let kept = limit / 2
        return String(text.prefix(kept)) + " … (\(text.count - 2 * kept) more characters) … " + String(text.suffix(kept))
    }

    /// Bytes, short: `12.3 MiB`.
    static func shortBytes(_ count: Int) -> String {
        bytes(count).split(separator: " (").first.map(String.init) ?? "\(count) bytes"
    }

    /// Seconds for people: `45s`, `3m05s`, `2h10m`.
    static func duration(_ seconds: Double) -> String {
        let total = Int(seconds.rounded())
        if total < 60 { return "\(total)s" }
        if total < 3600 { return "\(total / 60)m" + String(format: "%02ds", total % 60) }
        return "\(total / 3600)h" + String(format: "%02dm", total % 3600 / 60)
    }

    /// A word as a POSIX shell reads it back: bare when it is safe, else in single quotes.
    package static func shellQuoted(_ word: String) -> String {
        let safe = !word.isEmpty && word.unicodeScalars.allSatisfy {
            ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0) || "-_./=:@%+,".unicodeScalars.contains($0)
        }
        return safe ? word : "'" + word.replacingOccurrences(of: "'", with: "'\\''") + "'"
    }
}
