import EventLog
import Foundation

/// The lines of a byte stream read in chunks, without their "\n": only the chunk at hand and
/// one partial line are held, so an input of any size takes bounded memory, and a line
/// longer than `maxLineBytes` is an error rather than a buffer without end.
struct LineReader {
    /// A line that outgrew `maxLineBytes`.
    struct LineTooLong: Error, CustomStringConvertible {
        var limit: Int
        var description: String { "a line is longer than \(limit) bytes" }
    }

    private var read: () throws -> Data?
    /// Moves a seekable source to a byte offset; `nil` for a stream.
    private let seek: ((UInt64) throws -> Void)?
    private var buffer: [UInt8] = []
    /// Where the next line begins in `buffer`.
    private var start = 0
    /// `buffer[start..<scanned]` is known to hold no "\n".
    private var scanned = 0
    /// Bytes of the input before the next line.
    private(set) var offset: UInt64 = 0
    /// The size of the input, when it is a regular file.
    let totalBytes: UInt64?
    let maxLineBytes: Int

    /// Reads chunks from `read`, which returns `nil` or no bytes at the end of the stream.
    init(maxLineBytes: Int = StateLimits.maxJSONLineBytes, _ read: @escaping () throws -> Data?) {
        self.read = read
        self.seek = nil
        self.totalBytes = nil
        self.maxLineBytes = maxLineBytes
    }

    /// The lines of the file at `path`, read 1 MiB at a time. Throws a one-line reason when
    /// it cannot be opened or is a directory.
    init(path: String, maxLineBytes: Int = StateLimits.maxJSONLineBytes) throws(CLIError) {
        var info = stat()
        guard stat(path, &info) == 0 else { throw CLIError.badInput("cannot read \(path): \(String(cString: strerror(errno)))") }
        guard info.st_mode & S_IFMT != S_IFDIR else { throw CLIError.badInput("\(path) is a directory, not a file of JSON lines") }
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw CLIError.badInput("cannot read \(path): \(String(cString: strerror(errno)))")
        }
        let isRegular = info.st_mode & S_IFMT == S_IFREG
        self.read = { try handle.read(upToCount: 1 << 20) }
        self.seek = isRegular ? { try handle.seek(toOffset: $0) } : nil
        self.totalBytes = isRegular ? UInt64(info.st_size) : nil
        self.maxLineBytes = maxLineBytes
    }

    /// Whether `rewind(to:)` can go back.
    var canRewind: Bool { seek != nil }

    /// Goes back to `offset` (a value `offset` had before), so that the lines from there are
    /// read again. Only for a seekable source.
    mutating func rewind(to offset: UInt64) throws {
        guard let seek else { preconditionFailure("rewind on a stream") }
        try seek(offset)
        buffer.removeAll(keepingCapacity: true)
        (start, scanned, self.offset) = (0, 0, offset)
    }

    /// The next line, or `nil` after the last; a last line without "\n" counts, and the first
    /// line's UTF-8 byte order mark (which some editors write) does not. Throws what reading
    /// throws, and `LineTooLong`.
    mutating func next() throws -> ArraySlice<UInt8>? {
        let isFirst = offset == 0
        guard let line = try nextLine() else { return nil }
        let mark: [UInt8] = [0xEF, 0xBB, 0xBF]
        return isFirst && line.starts(with: mark) ? line.dropFirst(mark.count) : line
    }

    private mutating func nextLine() throws -> ArraySlice<UInt8>? {
        while true {
            if let newline = buffer[scanned...].firstIndex(of: UInt8(ascii: "\n")) {
                defer {
                    offset += UInt64(newline + 1 - start)
                    start = newline + 1
                    scanned = start
                }
                return buffer[start..<newline]
            }
            scanned = buffer.count
            guard buffer.count - start <= maxLineBytes else { throw LineTooLong(limit: maxLineBytes) }
            guard let chunk = try read(), !chunk.isEmpty else {
                guard start < buffer.count else { return nil }
                defer {
                    offset += UInt64(buffer.count - start)
                    start = buffer.count
                    scanned = start
                }
                return buffer[start...]
            }
            buffer.removeSubrange(..<start)
            scanned -= start
            start = 0
            buffer.append(contentsOf: chunk)
        }
    }
}
