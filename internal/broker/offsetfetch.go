package broker

// OffsetFetch, served by the group coordinator (internal/group).

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/group"
)

func init() { register(kmsg.OffsetFetch, 1, 9, byGroups((*group.Coordinator).OffsetFetch)) }
