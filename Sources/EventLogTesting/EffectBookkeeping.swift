import Effects
import EventLog

extension EffectEngine {
    /// What trace assertions on an effects app usually leave out: the engine's bookkeeping
    /// (plan starts, the initial state, and `plan.id` and `plan.source` written by them). Each
    /// step's event names its plan in its cause, which `eventlog` shows.
    public static var bookkeeping: TraceFilter {
        TraceFilter(streams: [planStream, initialStateStream], paths: ["plan"])
    }
}
