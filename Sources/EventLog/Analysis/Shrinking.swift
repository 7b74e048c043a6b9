/// The fewest inputs that still fail, by delta debugging (Zeller and Hildebrandt's ddmin): the
/// inputs are cut into ever smaller chunks, and a chunk, or everything but a chunk, is kept
/// when it still fails. The inputs keep their order. Run to the end, the result is
/// 1-minimal: leaving out any one of its inputs makes the failure go away.
public struct Shrinking<Input> {
    /// What a shrink found.
    public struct Result {
        /// The smallest failing subsequence found.
        public var inputs: [Input]
        /// Their positions in the inputs shrunk, ascending.
        public var positions: [Int]
        /// How many times `fails` was called (a subsequence is never tried twice).
        public var runs: Int
        /// Whether leaving out any one of `inputs` was tried and made the failure go away.
        public var isOneMinimal: Bool
    }

    /// Why a shrink stopped before it could prove its result 1-minimal.
    public enum Stop: Sendable, Hashable {
        /// `maxRuns` runs were made.
        case maxRuns
        /// `shouldStop` said so (a timeout, an interruption).
        case asked
    }

    /// The inputs to shrink, all of which fail together.
    public let inputs: [Input]
    /// The most calls of `fails` to make.
    public var maxRuns: Int
    /// Asked before every run; `true` stops the shrink with the best result so far.
    public var shouldStop: () -> Bool = { false }
    /// Called after every run with the best result so far.
    public var progress: (Result) -> Void = { _ in }

    /// A shrink of `inputs`, making at most `maxRuns` runs.
    public init(_ inputs: [Input], maxRuns: Int = 5_000) {
        self.inputs = inputs
        self.maxRuns = maxRuns
    }

    /// Shrinks the inputs, `fails` saying whether a subsequence of them still fails. It is
    /// called on all of them first, whatever `maxRuns` and `shouldStop` say: when they do not
    /// fail, the result is `nil`.
    /// - Returns: The result and, when it stopped early, why.
    /// - Throws: What `fails` throws, at once.
    public func run(_ fails: ([Input]) throws -> Bool) rethrows -> (result: Result, stopped: Stop?)? {
        var tried: [[Int]: Bool] = [:]
        var best = Result(inputs: inputs, positions: Array(inputs.indices), runs: 0, isOneMinimal: false)
        /// Whether `positions` fail; `nil` when the shrink must stop first (never before the
        /// first run: without it nothing is known to fail).
        func test(_ positions: [Int]) throws -> Bool? {
            if let known = tried[positions] { return known }
            guard best.runs == 0 || (best.runs < maxRuns && !shouldStop()) else { return nil }
            best.runs += 1
            let failed = try fails(positions.map { inputs[$0] })
            tried[positions] = failed
            if failed, positions.count < best.positions.count {
                best.positions = positions
                best.inputs = positions.map { inputs[$0] }
            }
            progress(best)
            return failed
        }
        func stopped() -> Stop { best.runs >= maxRuns ? .maxRuns : .asked }

        guard try test(best.positions) == true else { return nil }
        var chunks = 2
        while best.positions.count >= 2 {
            let current = best.positions
            let size = current.count
            let parts = (0..<chunks).map { part in (part * size / chunks)..<((part + 1) * size / chunks) }
            var reduced = false
            for part in parts {
                guard let failed = try test(Array(current[part])) else { return (best, stopped()) }
                if failed { chunks = 2; reduced = true; break }
            }
            if reduced { continue }
            for part in parts {
                guard let failed = try test(Array(current[..<part.lowerBound] + current[part.upperBound...])) else { return (best, stopped()) }
                if failed { chunks = max(chunks - 1, 2); reduced = true; break }
            }
            if reduced { continue }
            if chunks >= size { break }
            chunks = min(chunks * 2, size)
        }
        // One input left: 1-minimal once nothing at all does not fail.
        if best.positions.count == 1 {
            guard let failed = try test([]) else { return (best, stopped()) }
            if failed { best.positions = []; best.inputs = [] }
        }
        best.isOneMinimal = true
        return (best, nil)
    }
}
