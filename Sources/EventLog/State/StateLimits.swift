/// The bounds every event keeps, checked when it is appended (whether it came from the
/// library, `import` or an object save), so that whatever the log accepts reads back, folds
/// into keyframes and exports as JSON that `import` accepts again.
public enum StateLimits {
    /// Levels of nesting in the state: a write's path components plus the nesting of the
    /// value it writes, and the nesting of a payload. Readers accept twice as many, which
    /// leaves room for the levels an export wraps around a value.
    public static let maxDepth = 256
    /// Bytes of one stored record. Its JSON form stays under `maxJSONLineBytes`.
    public static let maxRecordBytes = 16 << 20
    /// Bytes of one JSON line `import` reads: enough for the export of any record the log
    /// accepts (a byte of a record takes at most six in JSON, as a `\u0000` escape).
    public static let maxJSONLineBytes = 128 << 20
    /// Levels of nesting the decoders accept (binary records and keyframes, JSON).
    static let maxReadDepth = 2 * maxDepth
}
