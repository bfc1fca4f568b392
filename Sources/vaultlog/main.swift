// The vaultlog CLI arrives with the CLI issue.
