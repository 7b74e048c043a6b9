import DemoCLI
import EventLogCLI
import Foundation

EventLogCLI.reportStorageFaultsAsDamage()
let console = Console.standard()
let status = EventLogCLI.run(Array(CommandLine.arguments.dropFirst()), environment: ProcessInfo.processInfo.environment, console: console,
                             app: .demo)
console.flush()
exit(status)
