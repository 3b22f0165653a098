package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/kmirror/kmirror/internal/config"
	"github.com/kmirror/kmirror/internal/console"
	"github.com/kmirror/kmirror/internal/node"
)

func newServeCommand() *cobra.Command {
	var (
		configFile string
		overrides  []string
		level      string
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run a kmirror broker (embedded defaults: data in ./data, listener localhost:9092, node ID 1, status console on http://localhost:9192)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			logger, err := newLogger(level)
			if err != nil {
				return err
			}
			// The embedded defaults serve the status console; a config file names its own.
			props := map[string]string{console.ConfigKey: console.DefaultListener}
			if configFile != "" {
				if props, err = config.ReadProperties(configFile); err != nil {
					return fmt.Errorf("--config: %w", err)
				}
			}
			for _, o := range overrides {
				k, v, ok := strings.Cut(o, "=")
				if !ok {
					return fmt.Errorf("--override %q: expected key=value", o)
				}
				props[strings.TrimSpace(k)] = strings.TrimSpace(v)
			}
			for _, f := range []struct{ flag, key string }{{"listeners", "listeners"}, {"advertised-listeners", "advertised.listeners"}, {"log-dirs", "log.dirs"}, {"node-id", "node.id"}} {
				if cmd.Flags().Changed(f.flag) {
					v, _ := cmd.Flags().GetString(f.flag)
					props[f.key] = v
				}
			}
			cfg, err := config.NewValues(config.Broker, props, false)
			if err != nil {
				return err
			}
			for k := range props {
				if !config.IsKnownBrokerKey(k) { // Kafka's AbstractConfig.logUnused
					logger.Warn("The configuration was supplied but isn't a known config", "key", k)
				}
			}
			// the embedded default's console is a convenience: when its address is taken (a
			// second broker started from flags on the same machine) the broker serves
			// without it; a metrics.listener the operator named must bind
			return runBroker(cfg, logger, configFile == "" && props[console.ConfigKey] == console.DefaultListener)
		},
	}
	cmd.Flags().StringVar(&configFile, "config", "", "server.properties-style file with Kafka's config names")
	cmd.Flags().StringArrayVar(&overrides, "override", nil, "key=value overriding the config file (repeatable)")
	cmd.Flags().String("listeners", "", "listeners (overrides the file), e.g. PLAINTEXT://localhost:9092")
	cmd.Flags().String("advertised-listeners", "", "advertised.listeners (overrides the file)")
	cmd.Flags().String("log-dirs", "", "log.dirs (overrides the file)")
	cmd.Flags().String("node-id", "", "node.id (overrides the file)")
	cmd.Flags().StringVar(&level, "log-level", "info", "log level: debug, info, warn, error")
	return cmd
}

func newLogger(level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: expected debug, info, warn or error", level)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l})), nil
}

// runBroker starts a broker and serves until SIGINT/SIGTERM, then shuts down cleanly:
// in-flight requests answered, logs flushed, checkpoints written. A broker that stopped
// serving by itself (Broker.Serve's error) is shut down too, and the error returned. A
// metrics.listener that cannot bind is an error, or with optionalConsole (the embedded
// default's) a warning, and the broker serves without its console.
func runBroker(cfg *config.Values, logger *slog.Logger, optionalConsole bool) error {
	b, err := node.New(cfg, logger)
	if err != nil {
		return err
	}
	if addr := cfg.String(console.ConfigKey); addr != "" {
		cs, err := console.Start(addr, b, logger, console.Options{})
		switch {
		case err != nil && optionalConsole:
			logger.Warn("status console not started: its default address is taken; set metrics.listener (--override metrics.listener=HOST:PORT) to serve it",
				"address", addr, "err", err)
		case err != nil:
			b.Shutdown(context.Background())
			return fmt.Errorf("%s %s: %w", console.ConfigKey, addr, err)
		default:
			defer cs.Close(context.Background())
		}
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	errc := make(chan error, 1)
	go func() { errc <- b.Serve() }()
	var failed error
	select {
	case s := <-sigs:
		logger.Info("shutting down", "signal", s.String())
	case failed = <-errc:
		if failed != nil {
			logger.Error("stopping: the broker cannot serve", "err", failed)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b.Shutdown(ctx)
	logger.Info("shutdown complete")
	return failed
}
