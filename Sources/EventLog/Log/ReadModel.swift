/// A table a family keeps beside the log, in the same environment, derived from its events
/// so that reads need not fold the log (the objects' current versions, by id). It commits in
/// the same transaction as the events it derives from, so it never runs ahead of the log nor
/// behind it; a tool that appends events some other way keeps it in line through this
/// protocol: `import` after each event, `salvage` and `rebuild` anew, `verify` and
/// `replay --verify` against the state.
public protocol ReadModel {
    /// What it is, for messages, such as `the objects' read model`.
    var name: String { get }
    /// What its entries are, in the plural, such as `objects`: how `rebuild` counts them,
    /// and the key of that count in JSON.
    var entries: String { get }

    /// Brings it in line with `batch.state` after an event appended in `batch` (not through
    /// the family's own API) applied `writes`; it commits, or not, with the batch.
    func keepInLine(after writes: [Write], in batch: inout AppendBatch) throws

    /// Makes it anew from the log's newest state in one transaction and returns how many
    /// entries it holds; a failure leaves it as it was.
    @discardableResult
    func rebuild() throws -> Int

    /// The first way it disagrees with `state` (the log's newest state when `nil`), in words,
    /// or `nil` when it agrees.
    func problem(against state: StateValue?) throws -> String?
}
