package metadata

import (
	"context"
	"fmt"
	"time"
)

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
