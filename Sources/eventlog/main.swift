import DemoCLI
import EventLogCLI

EventLogCLI.main(app: .demo)
