// Module VaultModel: see Docs/Architecture.md.
