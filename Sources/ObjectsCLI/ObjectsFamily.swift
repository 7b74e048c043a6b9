import EventLog
import EventLogCLI
import Objects

extension EventFamily {
    /// Typed collections of objects: the `objects` stream (every save and delete, taken as
    /// recorded: the saved fields are inputs), its read model of current versions, and the
    /// `objects` command.
    public static let objects = EventFamily(name: "objects", commands: ObjectCommands.all,
                                            readModels: { store in [try ObjectStore(store: store)] }) { code in
        code.takeAsRecorded([ObjectStore.stream])
    }
}
