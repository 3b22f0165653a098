package broker

// LeaveGroup, served by the group coordinator (internal/group).

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/group"
)

func init() {
	register(kmsg.LeaveGroup, 0, 5, groupReadGated(byGroups((*group.Coordinator).LeaveGroup)))
}
