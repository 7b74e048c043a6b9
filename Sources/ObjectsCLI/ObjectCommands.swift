import EventLog
import EventLogCLI
import Foundation
import Objects

/// `eventlog objects ACTION …`: the object store from the command line.
enum ObjectCommands {
    static let all: [CommandSpec] = [objects]

    static let objects = CommandSpec(
        name: "objects",
        summary: "Save, get, list and delete objects; every save and delete is an event.",
        discussion: """
            Actions:
              save TYPE JSON|-      create (no "id", or a new one) or update (a known "id") an object given as a
                                    JSON object, or read from stdin with -; prints it with its id, version and dates
              get TYPE ID           print one object
              list TYPE             print the objects in id order (--after ID and --limit N page through them)
              delete TYPE ID        delete one object
              delete-all TYPE       delete every object of TYPE in one event
            A save replaces the object's fields with the given ones; the store manages "id", "version",
            "createdAt" and "updatedAt" (RFC 3339). A missing object, a version conflict or an invalid
            object exits 2 and appends nothing.
            """,
        arguments: [
            .init(name: "ACTION", help: "save, get, list, delete or delete-all."),
            .init(name: "TYPE", help: "The collection, such as BlogPost."),
            .init(name: "ARG", help: "The JSON object (save) or the id (get, delete).", isOptional: true),
        ],
        options: [
            .init(name: "expect-version", value: "N", help: "save: refuse unless the object is at version N (0: must not exist)."),
            .init(name: "after", value: "ID", help: "list: start after this id."),
            .init(name: "limit", value: "N", help: "list: at most N objects (default 100)."),
        ],
        writes: true
    ) { arguments, context in
        let action = arguments.positionals[0]
        let collection = arguments.positionals[1]
        let argument = arguments.positionals.count > 2 ? arguments.positionals[2] : nil
        func needsArgument(_ what: String) throws(CLIError) -> String {
            guard let argument else { throw CLIError.usage("objects \(action) needs \(what)") }
            return argument
        }
        func noArgument() throws(CLIError) {
            if let argument { throw CLIError.usage("unexpected argument '\(argument)'") }
        }
        switch action {
        case "save":
            let text = try needsArgument("the object as JSON (or - for stdin)")
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
        case "get":
            let id = try needsArgument("an id")
            let store = try objectStore(context, writable: false)
            guard let object = try perform({ try store.fetch(collection, id: id) }) else {
                throw CLIError.badInput("\(ObjectStoreError.notFound(collection: collection, id: id))")
            }
            context.console.line(StateValue.object(object).json(pretty: !context.json))
        case "list":
            try noArgument()
            let limit = try arguments.count("limit") ?? 100
            let store = try objectStore(context, writable: false)
            let page = try perform { try store.fetchAll(collection, after: arguments.value("after"), limit: limit) }
            if context.json {
                context.printJSON(["next": StateValue(page.next), "objects": .array(page.objects.map(StateValue.object))])
            } else {
                for object in page.objects {
                    context.console.line("\(Render.escaped(object["id"]?.stringValue ?? "?"))  v\(object["version"]?.intValue ?? 0)  \(StateValue.object(object).json())")
                }
                if let next = page.next { context.console.line("more: eventlog objects list \(collection) --after \(Render.shellQuoted(next))") }
            }
        case "delete":
            let id = try needsArgument("an id")
            let store = try objectStore(context, writable: true)
            try perform(writingTo: context.databasePath) { try store.delete(collection, id: id) }
            context.console.line(context.json ? StateValue.object(["deleted": 1]).json() : "deleted \(collection) \(Render.escaped(id))")
        case "delete-all":
            try noArgument()
            let store = try objectStore(context, writable: true)
            let count = try perform(writingTo: context.databasePath) { try store.deleteAll(collection) }
            context.console.line(context.json ? StateValue.object(["deleted": .int(Int64(count))]).json() : "deleted \(count) \(collection) object\(count == 1 ? "" : "s")")
        default:
            throw CLIError.usage("unknown action '\(action)'; the actions are save, get, list, delete, delete-all")
        }
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
