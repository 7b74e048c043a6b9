import EventLogCLI

extension EventFamily {
    /// Logs of many installs in NATS JetStream: no stream of its own (it ships and pulls the
    /// log's records as stored), the `ship`, `pull` and `fleet` commands.
    public static let fleet = EventFamily(name: "fleet", commands: FleetCommands.all) { _ in }
}
