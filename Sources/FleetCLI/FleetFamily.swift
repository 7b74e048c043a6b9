import Fleet
import EventLogCLI

extension EventFamily {
    /// Logs of many installs in NATS JetStream: no stream of its own (it ships and pulls the
    /// log's records as stored), the `ship`, `pull` and `fleet` commands, and for
    /// `compact --shipped` the newest seq a stream acknowledged.
    public static let fleet = EventFamily(name: "fleet", commands: FleetCommands.all,
                                          shippedThrough: { store in try Shipper.shippedThrough(store) }) { _ in }
}
