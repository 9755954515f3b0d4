package version

// Attrs are the version as log attributes, for a start-up line.
func (i Info) Attrs() []any {
	return []any{"version", i.Version, "commit", i.Commit, "go", i.GoVersion}
}
