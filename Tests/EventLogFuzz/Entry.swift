import Foundation

/// `eventlog-fuzz`, two programs in one.
///
/// A plain build is the corpus replayer: `eventlog-fuzz TARGET FILE|DIR...` runs every file
/// (directories are walked) through the target once, so that CI checks the committed corpora
/// without libFuzzer.
///
/// Built with `-sanitize=fuzzer -DFUZZING` (see tools/fuzz.sh), it is a libFuzzer binary:
/// `EVENTLOG_FUZZ_TARGET=TARGET eventlog-fuzz [libFuzzer flags] [CORPUS...]`. The target comes
/// from the environment because the arguments are libFuzzer's, and the processes it starts
/// (for `-fork` or `-merge`) are given them again.
@main
enum FuzzMain {
    static func main() {
        #if FUZZING
        _ = selected // an unknown target fails here, before libFuzzer starts
        var argc = CommandLine.argc
        var argv = CommandLine.unsafeArgv
        exit(runDriver(&argc, &argv, testOneInput))
        #else
        replay(Array(CommandLine.arguments.dropFirst()))
        #endif
    }

    static func replay(_ arguments: [String]) {
        guard arguments.count >= 2 else {
            print("usage: eventlog-fuzz TARGET FILE|DIR...  (targets: \(targets.keys.sorted().joined(separator: ", ")))")
            exit(2)
        }
        let run = target(named: arguments[0])
        var count = 0
        for file in arguments.dropFirst().flatMap(files(at:)) {
            guard let data = FileManager.default.contents(atPath: file) else { fail("cannot read \(file)", status: 1) }
            run(Array(data))
            count += 1
        }
        print("eventlog-fuzz: replayed \(count) inputs through \(arguments[0])")
    }

    /// `path` itself, or the files under it, sorted, when it is a directory.
    static func files(at path: String) -> [String] {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue,
              let entries = try? FileManager.default.subpathsOfDirectory(atPath: path) else { return [path] }
        return entries.sorted().map { "\(path)/\($0)" }.filter { file in
            FileManager.default.fileExists(atPath: file, isDirectory: &isDirectory) && !isDirectory.boolValue
        }
    }
}

/// The target called `name`; exits with the list of targets when there is none.
func target(named name: String?) -> @Sendable ([UInt8]) -> Void {
    if let name, let target = targets[name] { return target }
    fail("unknown target '\(name ?? "")' (targets: \(targets.keys.sorted().joined(separator: ", ")))", status: 2)
}

func fail(_ message: String, status: Int32) -> Never {
    FileHandle.standardError.write(Data("eventlog-fuzz: \(message)\n".utf8))
    exit(status)
}

#if FUZZING
private let selected = target(named: ProcessInfo.processInfo.environment["EVENTLOG_FUZZ_TARGET"])

/// Runs one input through the selected target. libFuzzer's own `main`, which `-sanitize=fuzzer`
/// links in too, needs this symbol, but never runs: SwiftPM points `main` at the Swift one.
@_cdecl("LLVMFuzzerTestOneInput")
func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    selected(Array(UnsafeBufferPointer(start: data, count: size)))
    return 0
}

/// libFuzzer's driver: reads libFuzzer's flags and calls `callback` with each input.
@_extern(c, "LLVMFuzzerRunDriver")
func runDriver(_ argc: UnsafeMutablePointer<CInt>, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>>,
               _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt) -> CInt
#endif
