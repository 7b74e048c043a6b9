import EventLog
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Where a command's output goes. stdout carries the result only; diagnostics and progress
/// go to stderr, and progress only when stderr is a terminal.
public final class Console: @unchecked Sendable {
    private let writeOut: (String) -> Void
    private let writeErr: (String) -> Void
    private let readIn: () throws -> Data?
    private let flushOut: () -> Void
    private let outputClosed: () -> Bool
    private let outputFailure: () -> Int32
    /// Whether progress lines should be drawn on stderr.
    public let showsProgress: Bool
    /// Whether human output may use colours: stdout is a terminal and `NO_COLOR` is not set.
    public let usesColors: Bool
    /// The terminal's width in columns, when stdout is one: rows are cut to it.
    public let width: Int?

    /// `stdin` returns the next chunk of input, and `nil` or no bytes at its end.
    public init(stdout: @escaping (String) -> Void, stderr: @escaping (String) -> Void,
                stdin: @escaping () throws -> Data? = { nil }, showsProgress: Bool = false,
                flush: @escaping () -> Void = {}, isOutputClosed: @escaping () -> Bool = { false }, usesColors: Bool = false,
                width: Int? = nil, outputFailure: @escaping () -> Int32 = { 0 }) {
        writeOut = stdout
        writeErr = stderr
        readIn = stdin
        flushOut = flush
        outputClosed = isOutputClosed
        self.outputFailure = outputFailure
        self.showsProgress = showsProgress
        self.usesColors = usesColors
        self.width = width.map { max(20, $0) }
    }

    /// The process's own streams. stdout is buffered (64 KiB) until `flush()`; stderr is not.
    public static func standard() -> Console {
        let out = FileDescriptorBuffer(descriptor: STDOUT_FILENO)
        return Console(stdout: out.write,
                       stderr: { FileDescriptorBuffer.writeAll($0, to: STDERR_FILENO) },
                       stdin: { try FileHandle.standardInput.read(upToCount: 1 << 20) },
                       showsProgress: isatty(STDERR_FILENO) == 1,
                       flush: out.flush, isOutputClosed: { out.isClosed },
                       usesColors: isatty(STDOUT_FILENO) == 1 && (ProcessInfo.processInfo.environment["NO_COLOR"] ?? "").isEmpty
                           && ProcessInfo.processInfo.environment["TERM"] != "dumb",
                       width: terminalWidth(), outputFailure: { out.failure })
    }

    /// stdout's terminal width: the kernel's, else `$COLUMNS`; `nil` when stdout is no terminal.
    private static func terminalWidth() -> Int? {
        guard isatty(STDOUT_FILENO) == 1 else { return nil }
        var size = winsize()
        if ioctl(STDOUT_FILENO, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 { return Int(size.ws_col) }
        return ProcessInfo.processInfo.environment["COLUMNS"].flatMap(Int.init)
    }

    /// One row of a listing (a log line, a trace line), cut to the terminal's width with `…`
    /// when stdout is a terminal; whole otherwise (piped, or `--json`).
    public func row(_ text: String) {
        guard let width else { return line(text) }
        line(Render.fitted(text, width: width))
    }

    /// Writes `text` to stdout as it is.
    public func out(_ text: String) { writeOut(text) }
    /// Writes `text` and a newline to stdout.
    public func line(_ text: String = "") { writeOut(text + "\n") }
    /// Writes `text` to stderr as it is, after whatever stdout holds, so that the two interleave in order.
    public func error(_ text: String) {
        flushOut()
        writeErr(text)
    }
    /// stdin's lines, read a chunk at a time.
    func stdinLines(maxLineBytes: Int = StateLimits.maxJSONLineBytes) -> LineReader { LineReader(maxLineBytes: maxLineBytes, readIn) }

    /// The whole of `source` (a file, or stdin for `-`) as UTF-8 text of at most `limit`
    /// bytes; more, text that is not UTF-8, or a source that cannot be read is bad input,
    /// named as `what`.
    public func readText(_ source: String, limit: Int, what: String) throws(CLIError) -> String {
        var lines: LineReader
        if source == "-" { lines = stdinLines(maxLineBytes: limit) } else { lines = try LineReader(path: source, maxLineBytes: limit) }
        var bytes: [UInt8] = []
        do {
            while let line = try lines.next() {
                bytes += line
                bytes.append(UInt8(ascii: "\n"))
                guard bytes.count <= limit + 1 else { throw LineReader.LineTooLong(limit: limit) }
            }
        } catch {
            throw CLIError.badInput("cannot read the \(what) \(source == "-" ? "on stdin" : source): \(error)")
        }
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw CLIError.badInput("the \(what) \(source == "-" ? "on stdin" : source) is not UTF-8 text")
        }
        return text
    }

    /// Draws `text` over the previous progress line, when progress is shown.
    public func progress(_ text: String) {
        if showsProgress { writeErr("\r\u{1B}[2K" + text) }
    }

    /// Clears the progress line.
    public func endProgress() {
        if showsProgress { writeErr("\r\u{1B}[2K") }
    }

    /// Writes out whatever stdout still holds.
    public func flush() { flushOut() }

    /// Whether stdout's reader has gone (a closed pipe): a command that runs until stopped
    /// (`log --follow`) ends then.
    package var isOutputClosed: Bool { outputClosed() }

    /// Why writing stdout failed (`ENOSPC`, `EIO`), as an `errno`; `nil` when it did not, or
    /// only because its reader went away (a closed pipe, which ends a command quietly).
    package var outputError: Int32? {
        let failure = outputFailure()
        return failure == 0 ? nil : failure
    }
}

/// Collects output and writes it to a file descriptor in large chunks.
private final class FileDescriptorBuffer: Sendable {
    private let descriptor: Int32
    private let bytes: Locked<[UInt8]>
    private let closed = Atomic<Bool>(false)
    /// The `errno` of the first write that failed but for a closed pipe; 0 while none did.
    private let firstFailure = Atomic<Int32>(0)
    var failure: Int32 { firstFailure.load(ordering: .relaxed) }
    /// Whether the reader is gone: a write failed (`EPIPE`), or the pipe reports it hung up.
    var isClosed: Bool {
        if closed.load(ordering: .relaxed) { return true }
        var fd = pollfd(fd: descriptor, events: 0, revents: 0)
        return poll(&fd, 1, 0) == 1 && fd.revents & Int16(POLLERR | POLLHUP) != 0
    }

    init(descriptor: Int32) {
        self.descriptor = descriptor
        var buffer: [UInt8] = []
        buffer.reserveCapacity(1 << 16)
        bytes = Locked(buffer)
    }

    func write(_ text: String) {
        bytes.withLock { bytes in
            bytes.append(contentsOf: text.utf8)
            if bytes.count >= 1 << 16 { drain(&bytes) }
        }
    }

    func flush() { bytes.withLock { drain(&$0) } }

    private func drain(_ bytes: inout [UInt8]) {
        let error = bytes.withUnsafeBytes { Self.writeAll($0, to: descriptor) }
        if error != 0 {
            closed.store(true, ordering: .relaxed)
            if error != EPIPE { _ = firstFailure.compareExchange(expected: 0, desired: error, ordering: .relaxed) }
        }
        bytes.removeAll(keepingCapacity: true)
    }

    static func writeAll(_ text: String, to descriptor: Int32) {
        _ = Array(text.utf8).withUnsafeBytes { writeAll($0, to: descriptor) }
    }

    /// Writes every byte, retrying short writes and interrupts; returns 0, or the `errno` of
    /// the write that failed (`EPIPE` for a closed pipe), after which nothing more is written.
    static func writeAll(_ buffer: UnsafeRawBufferPointer, to descriptor: Int32) -> Int32 {
        var offset = 0
        while offset < buffer.count {
            let written = Glibc.write(descriptor, buffer.baseAddress! + offset, buffer.count - offset)
            if written < 0 {
                if errno == EINTR { continue }
                return errno
            }
            offset += written
        }
        return 0
    }
}
