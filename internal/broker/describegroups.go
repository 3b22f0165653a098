package broker

// DescribeGroups, served by the group coordinator (internal/group).

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/group"
)

func init() { register(kmsg.DescribeGroups, 0, 5, byGroups((*group.Coordinator).DescribeGroups)) }
