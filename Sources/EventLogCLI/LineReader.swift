import Foundation

/// The lines of a byte stream read in chunks, without their "\n": only the chunk at hand and
/// one partial line are held, so an input of any size takes bounded memory.
struct LineReader {
    private let read: () throws -> Data?
    private var buffer: [UInt8] = []
    /// Where the next line begins in `buffer`.
    private var start = 0
    /// `buffer[start..<scanned]` is known to hold no "\n".
    private var scanned = 0

    /// Reads chunks from `read`, which returns `nil` or no bytes at the end of the stream.
    init(_ read: @escaping () throws -> Data?) { self.read = read }

    /// The lines of the file at `path`, read 1 MiB at a time; `nil` when it cannot be opened.
    init?(path: String) {
        guard let handle = FileHandle(forReadingAtPath: path) else { return nil }
        self.init { try handle.read(upToCount: 1 << 20) }
    }

    /// The next line, or `nil` after the last; a last line without "\n" counts. Throws what
    /// reading throws.
    mutating func next() throws -> ArraySlice<UInt8>? {
        while true {
            if let newline = buffer[scanned...].firstIndex(of: UInt8(ascii: "\n")) {
                defer { start = newline + 1; scanned = start }
                return buffer[start..<newline]
            }
            scanned = buffer.count
            guard let chunk = try read(), !chunk.isEmpty else {
                guard start < buffer.count else { return nil }
                defer { start = buffer.count; scanned = start }
                return buffer[start...]
            }
            buffer.removeSubrange(..<start)
            scanned -= start
            start = 0
            buffer.append(contentsOf: chunk)
        }
    }
}
