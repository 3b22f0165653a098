package broker

// Heartbeat, served by the group coordinator (internal/group).

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/group"
)

func init() { register(kmsg.Heartbeat, 0, 4, groupReadGated(byGroups((*group.Coordinator).Heartbeat))) }
