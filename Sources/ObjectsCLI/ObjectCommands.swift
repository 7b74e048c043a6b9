import EventLog
import EventLogCLI
import Foundation
import Objects

/// `eventlog objects SUBCOMMAND …`: the object store from the command line.
enum ObjectCommands {
    static let all: [CommandSpec] = [objects]

    static let objects = CommandSpec(
        name: "objects",
        summary: "Save, get, list and delete objects; every save and delete is an event.",
        discussion: """
            A save replaces the object's fields with the given ones; the store manages "id", "version",
            "createdAt" and "updatedAt" (RFC 3339). A missing object, a version conflict or an invalid
            object exits 2 and appends nothing.
            """,
        subcommands: [save, get, list, delete, deleteAll]
    )

    static let type = CommandSpec.Argument(name: "TYPE", help: "The collection, such as BlogPost.")
    static let id = CommandSpec.Argument(name: "ID", help: "The object's id.")

    static let save = CommandSpec(
        name: "save",
        summary: "Create (no \"id\", or a new one) or update (a known \"id\") an object; prints it with its id, version and dates.",
        arguments: [type, .init(name: "JSON", help: "The object as a JSON object, or - to read it from stdin.")],
        options: [.init(name: "expect-version", value: "N", help: "Refuse unless the object is at version N (0: must not exist).")],
        writes: true
    ) { arguments, context in
        let (collection, text) = (arguments.positionals[0], arguments.positionals[1])
        let json = text == "-" ? try context.console.readText("-", limit: StateLimits.maxJSONLineBytes, what: "object") : text
        let fields: StateObject
        do {
            guard case .object(let object) = try StateValue(json: json) else { throw CLIError.badInput("the object must be a JSON object") }
            fields = object
        } catch let error as JSONSyntaxError {
            throw CLIError.badInput("the object is not valid JSON: \(error)")
        } catch {
            throw error
        }
        let expected = try arguments.value("expect-version").map { (text) throws(CLIError) -> Int64 in
            guard let version = Int64(text), version >= 0 else { throw CLIError.usage("--expect-version must be a whole number, not \"\(text)\"") }
            return version
        }
        let store = try objectStore(context, writable: true)
        let saved = try perform(writingTo: context.databasePath) { try store.save(fields, in: collection, expectedVersion: expected) }
        context.console.line(StateValue.object(saved).json(pretty: !context.json))
        return .ok
    }

    static let get = CommandSpec(name: "get", summary: "Print one object.", arguments: [type, id]) { arguments, context in
        let (collection, id) = (arguments.positionals[0], arguments.positionals[1])
        let store = try objectStore(context, writable: false)
        guard let object = try perform({ try store.fetch(collection, id: id) }) else {
            throw CLIError.badInput("\(ObjectStoreError.notFound(collection: collection, id: id))")
        }
        context.console.line(StateValue.object(object).json(pretty: !context.json))
        return .ok
    }

    static let list = CommandSpec(
        name: "list",
        summary: "Print the objects of a type in id order, a page at a time.",
        arguments: [type],
        options: [.init(name: "after", value: "ID", help: "Start after this id."),
                  .init(name: "limit", value: "N", help: "At most N objects (default 100).")]
    ) { arguments, context in
        let collection = arguments.positionals[0]
        let limit = try arguments.count("limit") ?? 100
        let store = try objectStore(context, writable: false)
        let page = try perform { try store.fetchAll(collection, after: arguments.value("after"), limit: limit) }
        if context.json {
            context.printJSON(["next": StateValue(page.next), "objects": .array(page.objects.map(StateValue.object))])
        } else {
            for object in page.objects {
                context.console.line("\(Render.escaped(object["id"]?.stringValue ?? "?"))  v\(object["version"]?.intValue ?? 0)  \(StateValue.object(object).json())")
            }
            if let next = page.next { context.console.line("more: \(context.app.name) objects list \(collection) --after \(Render.shellQuoted(next))") }
        }
        return .ok
    }

    static let delete = CommandSpec(name: "delete", summary: "Delete one object.", arguments: [type, id], writes: true) { arguments, context in
        let (collection, id) = (arguments.positionals[0], arguments.positionals[1])
        let store = try objectStore(context, writable: true)
        try perform(writingTo: context.databasePath) { try store.delete(collection, id: id) }
        context.console.line(context.json ? StateValue.object(["deleted": 1]).json() : "deleted \(collection) \(Render.escaped(id))")
        return .ok
    }

    static let deleteAll = CommandSpec(name: "delete-all", summary: "Delete every object of a type.", arguments: [type], writes: true) { arguments, context in
        let collection = arguments.positionals[0]
        let store = try objectStore(context, writable: true)
        let count = try perform(writingTo: context.databasePath) { try store.deleteAll(collection) }
        context.console.line(context.json ? StateValue.object(["deleted": .int(Int64(count))]).json() : "deleted \(count) \(collection) object\(count == 1 ? "" : "s")")
        return .ok
    }

    static func objectStore(_ context: CommandContext, writable: Bool) throws(CLIError) -> ObjectStore {
        let store = try context.openStore(writable: writable)
        return try attempt { try ObjectStore(store: store) }
    }

    /// Runs an object-store call; its refusals are bad input (exit 2).
    static func perform<R>(writingTo database: String? = nil, _ body: () throws -> R) throws(CLIError) -> R {
        try attempt(writingTo: database) {
            do { return try body() } catch let error as ObjectStoreError { throw CLIError.badInput("\(error)") }
        }
    }
}
