// Command kmirror is a Kafka-compatible broker with native Cluster Mirroring
// (KIP-1279). This file holds only the wiring of the subcommands.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	consumecli "github.com/kmirror/kmirror/internal/cli/consume"
	groupscli "github.com/kmirror/kmirror/internal/cli/groups"
	mirrorscli "github.com/kmirror/kmirror/internal/cli/mirrors"
	producecli "github.com/kmirror/kmirror/internal/cli/produce"
	topicscli "github.com/kmirror/kmirror/internal/cli/topics"
)

func main() {
	root := &cobra.Command{
		Use:           "kmirror",
		Short:         "A Kafka-compatible broker with native Cluster Mirroring (KIP-1279)",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version(),
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.AddCommand(newServeCommand(), mirrorscli.NewCommand(), groupscli.NewCommand(), topicscli.NewCommand(),
		producecli.NewCommand(), consumecli.NewCommand(), newDrillCommand(), newVersionCommand(), newConfigDocsCommand(), newQuickstartCommand(), newStorageCommand())
	if err := root.Execute(); err != nil {
		// The mirrors command has already printed its one-line error.
		var printed *mirrorscli.ExitError
		if !errors.As(err, &printed) {
			fmt.Fprintln(os.Stderr, "Error:", err)
		}
		os.Exit(1)
	}
}
