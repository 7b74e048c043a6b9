import EventLog
