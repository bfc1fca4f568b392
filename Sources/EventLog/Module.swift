// Module EventLog: see Docs/Architecture.md.
