package broker

// OffsetCommit, served by the group coordinator (internal/group), which writes the
// offsets to the group's partition of __consumer_offsets.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/group"
)

func init() { register(kmsg.OffsetCommit, 2, 9, byGroups((*group.Coordinator).OffsetCommit)) }
