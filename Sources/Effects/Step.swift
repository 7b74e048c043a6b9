import EventLog

/// A named state change from an app's closed set. Its name and arguments are what the log
/// records as the event's type and payload.
public protocol NamedEffect: Sendable, Hashable {
    /// The effect's name, such as `expandAvatar`.
    var name: String { get }
    /// The effect's arguments as a value, such as `{"id": "aria-7"}`; `.null` when none.
    var arguments: StateValue { get }

    /// Today's version of each effect whose arguments changed shape since version 1, by
    /// name (`["selectBotTab": 2]`); the log records it with each event. Bump it when the
    /// arguments change shape, and register an upcaster from the old version
    /// (``Projections/upcast(_:_:from:with:)``): replay reads older events through it, and
    /// without one they are unreadable.
    static var versions: [String: Int] { get }

    /// The effect a recorded event names, or `nil` when it names none of the app's effects.
    /// `Self(name: e.name, arguments: e.arguments) == e` for every effect.
    init?(name: String, arguments: StateValue)
}

extension NamedEffect {
    /// Every effect at version 1: arguments that never changed shape.
    public static var versions: [String: Int] { [:] }

    /// The version of the effect's arguments: its entry in `versions`, else 1.
    public var version: Int { Self.versions[name] ?? 1 }
}

/// One step of a plan: a structural navigation step, or one of the app's effects.
public enum Step<Effect: NamedEffect>: Sendable, Hashable, CustomStringConvertible {
    /// Pushes a screen onto the navigation stack.
    case push(String)
    /// Pops the top screen.
    case pop
    /// Pops every screen.
    case popToRoot
    /// Presents a sheet over the stack.
    case present(String)
    /// Dismisses the sheet.
    case dismissSheet
    /// Runs one of the app's effects.
    case effect(Effect)

    /// The name the log records as the step's event type: the navigation step's own
    /// (`push`, `popToRoot`, …) or the effect's.
    public var name: String {
        switch self {
        case .push: "push"
        case .pop: "pop"
        case .popToRoot: "popToRoot"
        case .present: "present"
        case .dismissSheet: "dismissSheet"
        case .effect(let effect): effect.name
        }
    }

    /// What the log records as the step's payload: `{"screen": …}` for `push`,
    /// `{"sheet": …}` for `present`, `.null` for the other navigation steps, the effect's own.
    public var arguments: StateValue {
        switch self {
        case .push(let screen): ["screen": .string(screen)]
        case .present(let sheet): ["sheet": .string(sheet)]
        case .pop, .popToRoot, .dismissSheet: .null
        case .effect(let effect): effect.arguments
        }
    }

    /// The version of `arguments`' shape: the effect's own; 1 for navigation steps.
    public var version: Int {
        if case .effect(let effect) = self { effect.version } else { 1 }
    }

    /// `expandAvatar(aria-7)`, `popToRoot`: the name and the argument values.
    public var description: String {
        guard case .object(let object) = arguments, !object.isEmpty else { return name }
        return "\(name)(\(arguments.argumentWords.joined(separator: ", ")))"
    }

    /// The step a recorded event ran, read back from its type and payload.
    public init?(name: String, arguments: StateValue) {
        switch name {
        case "push":
            guard let screen = arguments["screen"]?.stringValue else { return nil }
            self = .push(screen)
        case "present":
            guard let sheet = arguments["sheet"]?.stringValue else { return nil }
            self = .present(sheet)
        case "pop": self = .pop
        case "popToRoot": self = .popToRoot
        case "dismissSheet": self = .dismissSheet
        default:
            guard let effect = Effect(name: name, arguments: arguments) else { return nil }
            self = .effect(effect)
        }
    }

    var isNavigation: Bool {
        if case .effect = self { false } else { true }
    }
}

/// An ordered list of steps, and the text (a URL, a command) it came from.
public struct Plan<Effect: NamedEffect>: Sendable, Hashable {
    /// Where the plan came from, such as its URL; recorded in every step's cause.
    public var source: String
    /// The steps, run in order.
    public var steps: [Step<Effect>]

    /// A plan of `steps` that came from `source`.
    public init(source: String, steps: [Step<Effect>]) {
        self.source = source
        self.steps = steps
    }
}
