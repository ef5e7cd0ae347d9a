// Package version holds the build identity that make build stamps into both
// binaries with -ldflags.
package version

import "fmt"

// Set by the linker: -X github.com/clerum/hcc/pkg/version.Version=... and
// ...Commit=...
var (
	Version = "dev"
	Commit  = "unknown"
)

// String is what --version prints.
func String(binary string) string {
	return fmt.Sprintf("%s %s (commit %s)", binary, Version, Commit)
}
