import EventLog
import Testing

/// `Shrinking` on random failures of a small model: a session is a sequence of numbered
/// inputs, and it fails when it holds every input of a random set (in any order), or when
/// the inputs of a random set appear in their order; and, not monotone, when it holds an odd
/// number of a set's inputs. Whatever it finds still fails, and is 1-minimal.
@Suite struct ShrinkingTests {
    /// Checks what a finished shrink of `session` under `fails` claims, by brute force.
    func checkShrunk(_ session: [Int], _ fails: ([Int]) -> Bool) -> [Int]? {
        var calls = 0
        guard let (result, stopped) = Shrinking(session).run({ calls += 1; return fails($0) }) else {
            #expect(!fails(session))
            return nil
        }
        #expect(stopped == nil)
        #expect(result.isOneMinimal)
        #expect(result.runs == calls)
        #expect(fails(result.inputs), "\(result.inputs)")
        #expect(result.positions.map { session[$0] } == result.inputs)
        #expect(result.positions == result.positions.sorted())
        for leftOut in result.inputs.indices {
            var fewer = result.inputs
            fewer.remove(at: leftOut)
            #expect(!fails(fewer), "\(result.inputs) without \(result.inputs[leftOut]) still fails")
        }
        return result.inputs
    }

    @Test func randomFailuresShrinkToOneMinimalSessionsThatStillFail() {
        var rng = SplitMix64(seed: 7)
        for _ in 0..<200 {
            let session = (0..<Int.random(in: 1...120, using: &rng)).map { _ in Int.random(in: 0..<40, using: &rng) }
            let needed = Set((0..<Int.random(in: 1...4, using: &rng)).map { _ in Int.random(in: 0..<40, using: &rng) })
            let ordered = Array(needed).shuffled(using: &rng)
            let every = checkShrunk(session) { needed.isSubset(of: $0) }
            if let every { #expect(Set(every) == needed && every.count == needed.count) }
            _ = checkShrunk(session) { inputs in
                var next = 0
                for input in inputs where next < ordered.count && input == ordered[next] { next += 1 }
                return next == ordered.count
            }
            _ = checkShrunk(session) { inputs in inputs.filter(needed.contains).count % 2 == 1 }
        }
    }

    @Test func aSessionThatDoesNotFailHasNothingToShrink() {
        #expect(Shrinking([1, 2, 3]).run { $0.contains(4) } == nil)
        #expect(Shrinking([Int]()).run { $0.contains(4) } == nil)
    }

    @Test func aFailureThatNeedsNoInputShrinksToNone() throws {
        let (result, stopped) = try #require(Shrinking([1, 2, 3]).run { _ in true })
        #expect(result.inputs == [] && result.isOneMinimal && stopped == nil)
    }

    @Test func stoppedEarlyItKeepsTheSmallestFailingInputsFound() throws {
        let session = Array(0..<64)
        var shrinking = Shrinking(session, maxRuns: 4)
        let (result, stopped) = try #require(shrinking.run { $0.contains(37) })
        #expect(stopped == .maxRuns)
        #expect(result.runs == 4 && !result.isOneMinimal)
        #expect(result.inputs.contains(37) && result.inputs.count < 64)

        var asked = 0
        shrinking = Shrinking(session)
        shrinking.shouldStop = { asked += 1; return asked > 2 }
        let (early, why) = try #require(shrinking.run { $0.contains(37) })
        #expect(why == .asked && early.runs == 3 && early.inputs.contains(37))

        // The first run is made whatever stops it: without it nothing is known to fail.
        shrinking.shouldStop = { true }
        #expect(shrinking.run { $0.contains(99) } == nil)
        let (whole, stop) = try #require(shrinking.run { $0.contains(37) })
        #expect(stop == .asked && whole.runs == 1 && whole.inputs == session)
    }

    @Test func anErrorOfARunEndsTheShrinkAtOnce() {
        struct Broken: Error {}
        var runs = 0
        #expect(throws: Broken.self) {
            try Shrinking(Array(0..<10)).run { inputs in
                runs += 1
                if runs == 3 { throw Broken() }
                return inputs.contains(5)
            }
        }
        #expect(runs == 3)
    }
}
