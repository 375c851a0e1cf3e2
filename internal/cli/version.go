package cli

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version is set at build time with -ldflags "-X .../internal/cli.version=v1.2.3";
// a plain `go build` or `go install` falls back to the module and VCS data
// the Go toolchain records.
var version = ""

func versionString() string {
	v, rev := version, ""
	if info, ok := debug.ReadBuildInfo(); ok {
		if v == "" && info.Main.Version != "" && info.Main.Version != "(devel)" {
			v = info.Main.Version
		}
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				rev = s.Value[:12]
			}
		}
	}
	if v == "" {
		v = "dev"
	}
	if rev != "" {
		v += " (" + rev + ")"
	}
	return fmt.Sprintf("terp %s %s/%s %s", v, runtime.GOOS, runtime.GOARCH, runtime.Version())
}

func newCmdVersion(f *Factory) *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "Print terp's version",
		Example: "  terp version",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(f.IO.Out, versionString())
			return err
		},
	}
}
