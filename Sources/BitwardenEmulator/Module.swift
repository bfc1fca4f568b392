// Module BitwardenEmulator: see Docs/Architecture.md.
