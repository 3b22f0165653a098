package broker

// DeleteGroups, served by the group coordinator (internal/group).

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/group"
)

func init() { register(kmsg.DeleteGroups, 0, 2, byGroups((*group.Coordinator).DeleteGroups)) }
