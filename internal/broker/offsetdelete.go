package broker

// OffsetDelete, served by the group coordinator (internal/group).

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/group"
)

func init() { register(kmsg.OffsetDelete, 0, 0, byGroups((*group.Coordinator).OffsetDelete)) }
