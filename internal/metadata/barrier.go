package metadata

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
)

// IsLeader reports whether this node leads the metadata quorum (is the active
// controller's node).
func (c *Controller) IsLeader() bool { return c.raft.State() == raft.Leader }

// Barrier waits until every record committed before it is applied to the image; only the
// leader can (ErrNotController otherwise).
func (c *Controller) Barrier(ctx context.Context) error {
	timeout := time.Minute
	if d, ok := ctx.Deadline(); ok {
		timeout = time.Until(d)
	}
	if err := c.raft.Barrier(timeout).Error(); err != nil {
		return fmt.Errorf("%w: %v", ErrNotController, err)
	}
	return nil
}
