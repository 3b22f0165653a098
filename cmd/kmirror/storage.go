package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"github.com/spf13/cobra"

	mirrorscli "github.com/kmirror/kmirror/internal/cli/mirrors"
	"github.com/kmirror/kmirror/internal/config"
	"github.com/kmirror/kmirror/internal/metadata"
	"github.com/kmirror/kmirror/internal/security"
)

// newStorageCommand is `kmirror storage`, Kafka's kafka-storage: random-uuid, format and
// info for the log directory of a node with process.roles.
func newStorageCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "storage",
		Short: "Make a cluster ID, format or inspect a node's log directory (Kafka's kafka-storage)",
		Long: `A cluster node (process.roles set) needs its log directory formatted before its first
start: make one cluster ID for the cluster with random-uuid, then format every node with
it. A one-node kmirror without process.roles and controller.quorum.voters formats its
log directory itself on first start.`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "random-uuid",
		Short: "Print a random UUID, for a cluster ID",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintln(cmd.OutOrStdout(), config.RandomUUID())
			return nil
		},
	}, newStorageFormatCommand(), newStorageInfoCommand())
	return cmd
}

func newStorageFormatCommand() *cobra.Command {
	var (
		clusterID, configFile string
		ignoreFormatted       bool
		addScram              []string
	)
	cmd := &cobra.Command{
		Use:   "format -t CLUSTER_ID -c FILE",
		Short: "Format the node's log directory: write meta.properties with the cluster ID and node.id",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return formatStorage(cmd.OutOrStdout(), configFile, clusterID, ignoreFormatted, addScram)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&clusterID, "cluster-id", "t", "", "the cluster ID (kmirror storage random-uuid makes one)")
	f.StringVarP(&configFile, "config", "c", "", "the node's server.properties")
	f.BoolVarP(&ignoreFormatted, "ignore-formatted", "g", false, "skip an already formatted directory rather than failing")
	f.StringArrayVarP(&addScram, "add-scram", "S", nil, "a SCRAM credential to bootstrap the cluster with, 'SCRAM-SHA-256=[name=alice,password=alice-secret]' (repeatable; optional iterations=N, 4096 by default)")
	_ = cmd.MarkFlagRequired("cluster-id")
	_ = cmd.MarkFlagRequired("config")
	return cmd
}

// readNodeConfig reads a server.properties file and validates its node settings.
func readNodeConfig(file string) (*config.Values, *config.Node, error) {
	props, err := config.ReadProperties(file)
	if err != nil {
		return nil, nil, fmt.Errorf("--config: %w", err)
	}
	v, err := config.NewValues(config.Broker, props, false)
	if err != nil {
		return nil, nil, err
	}
	node, err := config.ParseNode(v)
	if err != nil {
		return nil, nil, err
	}
	return v, node, nil
}

// formatStorage is Kafka's Formatter for kmirror's one log directory: meta.properties
// with version 1, the cluster ID, node.id and a new directory.id, and with --add-scram the
// bootstrap records of the SCRAM credentials (metadata.BootstrapFile). A node without
// process.roles is formatted only to bootstrap SCRAM credentials.
func formatStorage(out io.Writer, file, clusterID string, ignoreFormatted bool, addScram []string) error {
	v, node, err := readNodeConfig(file)
	if err != nil {
		return err
	}
	var bootstrap []metadata.Record
	for _, arg := range addScram {
		u, err := security.ParseAddScram(arg)
		if err != nil {
			return err
		}
		c, err := security.NewScramCredential(u.Mechanism, u.Password, u.Iterations)
		if err != nil {
			return err
		}
		bootstrap = append(bootstrap, metadata.UserScramCredentialRecord{
			Name: u.Name, Mechanism: security.ScramMechanismCode(u.Mechanism),
			Salt: c.Salt, StoredKey: c.StoredKey, ServerKey: c.ServerKey, Iterations: c.Iterations,
		})
	}
	if node.Legacy && len(bootstrap) == 0 {
		return fmt.Errorf("%s has no process.roles: a node without process.roles and controller.quorum.voters formats its log directory itself on first start, so kmirror storage format is only for cluster nodes, or to bootstrap SCRAM credentials with --add-scram", file)
	}
	if clusterID, err = config.ParseClusterID(clusterID); err != nil {
		return err
	}
	dir, err := config.LogDir(v)
	if err != nil {
		return err
	}
	switch _, err := config.ReadMetaProperties(dir); {
	case err == nil:
		// The same cluster and node may be skipped; another one is an error even then.
		if _, err := config.CheckFormatted(dir, node, clusterID); err != nil {
			return err
		}
		if !ignoreFormatted {
			//lint:ignore ST1005 Kafka's text, which operators search for
			return fmt.Errorf("Log directory %s is already formatted. Use --ignore-formatted to ignore this directory and format the others.", dir)
		}
		fmt.Fprintln(out, "All of the log directories are already formatted.")
		return nil
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	m := &config.MetaProperties{Version: 1, ClusterID: clusterID, NodeID: node.NodeID, DirectoryID: config.RandomUUID()}
	if err := config.WriteMetaProperties(dir, m); err != nil {
		//lint:ignore ST1005 Kafka's text, which operators search for
		return fmt.Errorf("Error while writing meta.properties file %s: %w", dir, err)
	}
	if len(bootstrap) > 0 {
		if err := metadata.WriteBootstrap(dir, bootstrap); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "Formatted %s with cluster.id %s, node.id %d.\n", dir, clusterID, node.NodeID)
	return nil
}

func newStorageInfoCommand() *cobra.Command {
	var configFile string
	cmd := &cobra.Command{
		Use:   "info -c FILE",
		Short: "Show the node's log directory and its meta.properties; exit 1 on a problem",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v, _, err := readNodeConfig(configFile)
			if err != nil {
				return err
			}
			dir, err := config.LogDir(v)
			if err != nil {
				return err
			}
			return storageInfo(cmd.OutOrStdout(), dir)
		},
	}
	cmd.Flags().StringVarP(&configFile, "config", "c", "", "the node's server.properties")
	_ = cmd.MarkFlagRequired("config")
	return cmd
}

// storageInfo prints what Kafka's `kafka-storage info` prints for one directory.
func storageInfo(out io.Writer, dir string) error {
	var problem string
	var m *config.MetaProperties
	if st, err := os.Stat(dir); err != nil {
		problem = dir + " does not exist"
	} else if !st.IsDir() {
		problem = dir + " is not a directory"
	} else {
		fmt.Fprintf(out, "Found log directory:\n  %s\n\n", dir)
		if m, err = config.ReadMetaProperties(dir); errors.Is(err, fs.ErrNotExist) {
			problem = dir + " is not formatted."
		} else if err != nil {
			problem = "Error loading " + err.Error()
		}
	}
	if m != nil {
		found := []string{"cluster.id=" + m.ClusterID}
		if m.DirectoryID != "" {
			found = append(found, "directory.id="+m.DirectoryID)
		}
		if m.Version == 0 {
			found = append([]string{fmt.Sprintf("broker.id=%d", m.NodeID)}, found...)
		} else {
			found = append(found, fmt.Sprintf("node.id=%d", m.NodeID))
		}
		found = append(found, fmt.Sprintf("version=%d", m.Version))
		fmt.Fprintf(out, "Found metadata: {%s}\n\n", strings.Join(found, ", "))
	}
	if problem == "" {
		return nil
	}
	fmt.Fprintf(out, "Found problem:\n  %s\n\n", problem)
	return &mirrorscli.ExitError{Err: errors.New(problem), Code: 1}
}
