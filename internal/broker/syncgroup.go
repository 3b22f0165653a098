package broker

// SyncGroup, served by the group coordinator (internal/group).

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/group"
)

func init() { register(kmsg.SyncGroup, 0, 5, groupReadGated(byGroups((*group.Coordinator).SyncGroup))) }
