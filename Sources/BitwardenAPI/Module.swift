// Module BitwardenAPI: see Docs/Architecture.md.
