/// When the store writes a keyframe (the whole state after an event).
///
/// A keyframe is due once at least `minimumEvents` events have been appended since the last
/// one and their records add up to `ratio` times the size of the state (as the last
/// keyframe's size plus what the writes since added or removed). So keyframes take about
/// 1/`ratio` of the log's bytes, and the state after any event costs one keyframe plus
/// about `ratio` keyframes' worth of write sets: work proportional to the state, never to
/// the length of the log. A small state gets a keyframe every few dozen events; a state of
/// thousands of objects is copied rarely, never per event.
public struct KeyframePolicy: Sendable, Hashable {
    /// Records since the last keyframe, as a multiple of the state's size, before the next.
    public var ratio: UInt32
    /// The fewest events between two keyframes.
    public var minimumEvents: UInt32

    /// A policy of `ratio` and `minimumEvents`; a value below 1 is taken as 1.
    public init(ratio: UInt32 = 8, minimumEvents: UInt32 = 8) {
        self.ratio = max(1, ratio)
        self.minimumEvents = max(1, minimumEvents)
    }
}

/// How far the log has come since its last keyframe. The writer and `verify` both run it
/// over the stored records, so both agree on where every keyframe belongs.
struct KeyframeProgress: Sendable, Hashable {
    var events: UInt64 = 0
    /// Bytes of records since the last keyframe.
    var bytes: Int = 0
    /// The encoded size of the state: the last keyframe's stored size, moved by every write.
    var stateBytes: Int = KeyframeProgress.emptyStateBytes

    /// An empty object (2 bytes) and its checksum (4).
    static let emptyStateBytes = 6

    /// Counts one appended record of `size` bytes whose writes change the encoded size of the
    /// state by `stateDelta` (see `sizeChange`), and says whether a keyframe is now due.
    mutating func record(_ size: Int, stateDelta: Int, policy: KeyframePolicy) -> Bool {
        events += 1
        bytes += size
        stateBytes += stateDelta
        return events >= UInt64(policy.minimumEvents) && bytes >= max(stateBytes, Self.emptyStateBytes) * Int(policy.ratio)
    }

    /// How one write changes the encoded size of the state, given the encoded sizes of its old
    /// and new values (`nil` when absent): the value's bytes, and the key's when the write adds
    /// or removes an object entry. The codec measures the sizes as it encodes or decodes.
    static func sizeChange(_ path: StatePath, oldSize: Int?, newSize: Int?) -> Int {
        var change = (newSize ?? 0) - (oldSize ?? 0)
        if (oldSize == nil) != (newSize == nil), case .key(let key)? = path.components.last {
            change += (newSize == nil ? -1 : 1) * (key.utf8.count + 1)
        }
        return change
    }

    /// Starts counting afresh after a keyframe of `size` bytes.
    mutating func keyframeWritten(_ size: Int) {
        self = KeyframeProgress(stateBytes: size)
    }
}
