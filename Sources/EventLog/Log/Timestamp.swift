import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A point in time with microsecond precision, shown in RFC 3339 (`2026-11-30T02:05:40.123456Z`).
public struct Timestamp: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// Microseconds since 1970-01-01T00:00:00Z, negative before it.
    public var microsecondsSince1970: Int64

    /// Any time, including those RFC 3339 cannot write (see ``isRFC3339``), which the log refuses.
    public init(microsecondsSince1970: Int64) { self.microsecondsSince1970 = microsecondsSince1970 }

    /// The wall clock now.
    public static func now() -> Timestamp {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Timestamp(microsecondsSince1970: Int64(ts.tv_sec) * 1_000_000 + Int64(ts.tv_nsec) / 1_000)
    }

    public static func < (a: Timestamp, b: Timestamp) -> Bool { a.microsecondsSince1970 < b.microsecondsSince1970 }

    /// RFC 3339 in UTC with six fractional digits, written straight into the string's storage
    /// (an object save formats two of these). Years past 9999 get more digits, and years
    /// before 0 a sign, which RFC 3339 has no room for.
    public var description: String {
        let micros = microsecondsSince1970
        let seconds = micros.floorDiv(1_000_000)
        let fraction = micros - seconds * 1_000_000
        let days = seconds.floorDiv(86_400)
        let secondOfDay = seconds - days * 86_400
        let (year, month, day) = Self.civil(fromDays: days)
        return String(unsafeUninitializedCapacity: 40) { text in
            var at = 0
            func put(_ character: Unicode.Scalar) {
                text[at] = UInt8(ascii: character)
                at += 1
            }
            func put(_ value: Int64, width: Int) {
                var digits = 1
                var rest = value / 10
                while rest > 0 { (digits, rest) = (digits + 1, rest / 10) }
                var value = value
                for index in (at..<at + max(width, digits)).reversed() {
                    text[index] = UInt8(ascii: "0") + UInt8(value % 10)
                    value /= 10
                }
                at += max(width, digits)
            }
            if year < 0 { put("-") }
            put(abs(year), width: 4)
            put("-")
            put(month, width: 2)
            put("-")
            put(day, width: 2)
            put("T")
            put(secondOfDay / 3600, width: 2)
            put(":")
            put(secondOfDay / 60 % 60, width: 2)
            put(":")
            put(secondOfDay % 60, width: 2)
            put(".")
            put(fraction, width: 6)
            put("Z")
            return at
        }
    }

    /// Parses RFC 3339: `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`; `nil` when it does not fit.
    public init?(rfc3339 text: String) {
        guard let time = try? Timestamp(parsingRFC3339: text) else { return nil }
        self = time
    }

    /// Parses RFC 3339, `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`, into a time the log can keep.
    ///
    /// - Throws: ``TimestampFormatError`` saying what does not fit: the shape, a month, day,
    ///   hour, minute or second that does not exist (a leap second's 60 included: the log's
    ///   clock has none), a fraction finer than a microsecond (it would not come back the
    ///   same), or a time outside the years 0000 to 9999 in UTC.
    public init(parsingRFC3339 text: String) throws(TimestampFormatError) {
        let b = Array(text.utf8)
        func number(_ range: Range<Int>) -> Int64? {
            guard range.upperBound <= b.count else { return nil }
            var v: Int64 = 0
            for i in range {
                guard (48...57).contains(b[i]) else { return nil }
                v = v * 10 + Int64(b[i] - 48)
            }
            return v
        }
        func fail(_ reason: String) -> TimestampFormatError { TimestampFormatError(reason: reason) }
        var shape: TimestampFormatError { fail("expected YYYY-MM-DDTHH:MM:SS, an optional fraction, then Z or ±HH:MM") }
        guard b.count >= 20, b[4] == 45, b[7] == 45, b[10] == 84 || b[10] == 116, b[13] == 58, b[16] == 58,
              let y = number(0..<4), let mo = number(5..<7), let d = number(8..<10),
              let h = number(11..<13), let mi = number(14..<16), let s = number(17..<19) else { throw shape }
        guard (1...12).contains(mo) else { throw fail("there is no month \(mo)") }
        let days = Self.daysIn(month: mo, of: y)
        guard (1...days).contains(d) else { throw fail("month \(mo) of \(y) has days 1 to \(days), not \(d)") }
        guard h < 24, mi < 60 else { throw fail("there is no \(h < 24 ? "minute \(mi)" : "hour \(h)")") }
        guard s < 60 else { throw fail(s == 60 ? "second 60 is a leap second, which the log's clock does not have" : "there is no second \(s)") }
        var at = 19
        var micros: Int64 = 0
        if b[at] == 46 { // "."
            at += 1
            var digits = 0
            while at < b.count, (48...57).contains(b[at]) {
                if digits < 6 {
                    micros = micros * 10 + Int64(b[at] - 48)
                } else if b[at] != 48 {
                    throw fail("the fraction is finer than a microsecond, which the log keeps")
                }
                digits += 1
                at += 1
            }
            guard digits > 0 else { throw shape }
            for _ in digits..<max(digits, 6) { micros *= 10 }
        }
        var offset: Int64 = 0
        guard at < b.count else { throw shape }
        if b[at] == 90 || b[at] == 122 { // Z
            at += 1
        } else if b[at] == 43 || b[at] == 45, let oh = number(at + 1..<at + 3), at + 3 < b.count, b[at + 3] == 58,
                  let om = number(at + 4..<at + 6) {
            guard oh < 24, om < 60 else { throw fail("the offset must be under 24 hours and its minutes under 60") }
            offset = (oh * 3600 + om * 60) * (b[at] == 45 ? -1 : 1)
            at += 6
        } else {
            throw shape
        }
        guard at == b.count else { throw shape }
        let seconds = Self.days(fromCivil: y, mo, d) * 86_400 + h * 3600 + mi * 60 + s - offset
        let microseconds = seconds * 1_000_000 + micros
        guard Self.rfc3339Range.contains(microseconds) else { throw fail("it falls outside the years 0000 to 9999 in UTC") }
        self.init(microsecondsSince1970: microseconds)
    }

    /// The times RFC 3339 can write (years 0000 to 9999 in UTC), in microseconds since 1970:
    /// the times the log accepts, so that every stored time exports as text that parses back.
    public static let rfc3339Range: ClosedRange<Int64> =
        days(fromCivil: 0, 1, 1) * 86_400_000_000...days(fromCivil: 10_000, 1, 1) * 86_400_000_000 - 1

    /// Whether RFC 3339 can write this time (see `rfc3339Range`).
    public var isRFC3339: Bool { Self.rfc3339Range.contains(microsecondsSince1970) }

    static func daysIn(month: Int64, of year: Int64) -> Int64 {
        switch month {
        case 2: year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    // Days since 1970-01-01 to and from a proleptic Gregorian date (Howard Hinnant's algorithms).
    static func civil(fromDays z: Int64) -> (Int64, Int64, Int64) {
        let z = z + 719_468
        let era = z.floorDiv(146_097)
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        return (yoe + era * 400 + (m <= 2 ? 1 : 0), m, d)
    }

    static func days(fromCivil y: Int64, _ m: Int64, _ d: Int64) -> Int64 {
        let y = m <= 2 ? y - 1 : y
        let era = y.floorDiv(400)
        let yoe = y - era * 400
        let doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }
}

extension Int64 {
    fileprivate func floorDiv(_ d: Int64) -> Int64 {
        let q = self / d
        return (self % d != 0 && (self < 0) != (d < 0)) ? q - 1 : q
    }
}

/// The source of event times. Inject a fixed or stepping clock in tests.
public struct EventClock: Sendable {
    /// Reads the time; the store calls it once for each event it appends without a time,
    /// possibly from a thread of its own (a large batch is encoded on a second thread).
    public let now: @Sendable () -> Timestamp

    /// A clock that reads `now`.
    public init(now: @escaping @Sendable () -> Timestamp) { self.now = now }

    /// The system's wall clock.
    public static let system = EventClock(now: Timestamp.now)
}

/// A clock that moves only when told (and, optionally, by a fixed step at every reading):
/// deterministic time for tests and simulated sessions.
public final class ManualClock: Sendable {
    private let current: Locked<Timestamp>
    private let step: Int64

    /// Starts at `start`; every reading moves it on by `stepMicroseconds` afterwards.
    public init(start: Timestamp, stepMicroseconds: Int64 = 0) {
        current = Locked(start)
        step = stepMicroseconds
    }

    /// Moves the clock forward.
    public func advance(microseconds: Int64) {
        current.withLock { $0.microsecondsSince1970 += microseconds }
    }

    /// The current time, without moving the clock.
    public var now: Timestamp { current.withLock { $0 } }

    /// This clock as the `EventClock` a store or engine reads.
    public var clock: EventClock {
        EventClock { [self] in
            current.withLock { time in
                defer { time.microsecondsSince1970 += step }
                return time
            }
        }
    }
}

/// Text that is not a time the log can keep (see ``Timestamp/init(parsingRFC3339:)``).
public struct TimestampFormatError: Error, Hashable, CustomStringConvertible {
    /// What does not fit, for people.
    public let reason: String
    public var description: String { reason }
}
