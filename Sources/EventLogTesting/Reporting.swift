import Testing
import XCTest

/// Where an assertion was written, so that its failure is reported at that line under Swift
/// Testing and XCTest alike. Every assertion of this module takes its parts as defaulted
/// arguments (`#fileID`, `#filePath`, `#line`, `#column`): a default argument is filled in at
/// the call only when it is the magic literal itself.
struct TestLocation: Sendable {
    var fileID: String
    var filePath: StaticString
    var line: UInt
    var column: UInt

    /// Records a failure at this location: an issue of the running Swift Testing test, or
    /// else an XCTest failure.
    func fail(_ message: String) {
        if Test.current != nil {
            Issue.record(Comment(rawValue: message),
                         sourceLocation: SourceLocation(fileID: fileID, filePath: "\(filePath)", line: Int(line), column: Int(column)))
        } else {
            XCTFail(message, file: filePath, line: line)
        }
    }

    /// Records a failure about the log in `directory`, which is kept so that `commands` can
    /// open it; they close the message.
    func fail(_ message: String, keeping directory: TemporaryDirectory, explore commands: [String]) {
        directory.keep()
        fail(message + "\nThe log is kept:\n" + commands.map { "    " + $0 }.joined(separator: "\n"))
    }
}
