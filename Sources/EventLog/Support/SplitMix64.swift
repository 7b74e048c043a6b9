/// A small, fast, seedable random generator (SplitMix64), so that generated sessions,
/// randomised tests and benchmarks replay exactly from their seed (for this package: it is
/// no part of the library an app uses).
package struct SplitMix64: RandomNumberGenerator, Sendable {
    private var state: UInt64

    /// A generator whose numbers are fixed by `seed`: the same seed gives the same sequence on
    /// every platform and in every run.
    package init(seed: UInt64) { state = seed }

    package mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
