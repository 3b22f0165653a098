package mirror

import (
	"log/slog"

	"github.com/kmirror/kmirror/internal/broker"
	"github.com/kmirror/kmirror/internal/config"
)

// ForBroker builds the mirror manager of a broker (broker.NewMirrorsFunc): the broker
// is the manager's Local, and the mirror.* broker settings come from cfg.
func ForBroker(local *broker.Broker, cfg *config.Values, logger *slog.Logger) broker.Mirrors {
	return NewManager(Options{Local: local, Logger: logger, Config: BrokerConfigFrom(cfg)})
}
