package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version is kmirror's version line: the module version (v0.0.0-… pseudo-versions and
// "(devel)" for a build from a work tree), the VCS revision and time when the build
// recorded them, and the Go version.
func version() string {
	v, rev, at, dirty := "(devel)", "", "", false
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.time":
				at = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
	}
	out := "kmirror " + v
	if rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if dirty {
			rev += "-dirty"
		}
		out += " (commit " + rev
		if at != "" {
			out += ", " + at
		}
		out += ")"
	}
	return out + " " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH
}

// newVersionCommand is `kmirror version`, the line `kmirror --version` prints too.
func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print kmirror's version",
		Args:  cobra.NoArgs,
		Run:   func(cmd *cobra.Command, _ []string) { fmt.Fprintln(cmd.OutOrStdout(), version()) },
	}
}
