// Package node wires a kmirror node: the broker (internal/broker) with Cluster Mirroring
// (internal/mirror) on top, the one place that knows both. cmd/kmirror, the quickstart and
// the in-process test brokers start nodes through it.
package node

import (
	"log/slog"

	"github.com/kmirror/kmirror/internal/broker"
	"github.com/kmirror/kmirror/internal/config"
	"github.com/kmirror/kmirror/internal/mirror"
)

// New starts a broker with cluster mirroring (broker.New with Mirrors).
func New(cfg *config.Values, logger *slog.Logger) (*broker.Broker, error) {
	return broker.New(cfg, logger, Mirrors)
}

// Mirrors builds the mirror manager of a broker (broker.NewMirrorsFunc): the broker is
// the manager's Local, and the mirror.* broker settings come from cfg.
func Mirrors(local *broker.Broker, cfg *config.Values, logger *slog.Logger) broker.Mirrors {
	return mirror.NewManager(mirror.Options{Local: local, Logger: logger, Config: mirror.BrokerConfigFrom(cfg)})
}
