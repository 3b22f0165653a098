package drill

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/mirrorproto"
)

// startTopic starts topic in mirror (StartMirrorTopics by name).
func startTopic(ctx context.Context, cl *kgo.Client, mirror, topic string) error {
	req := mirrorproto.NewStartMirrorTopicsRequest()
	req.MirrorName = mirror
	req.Topics = []mirrorproto.StartMirrorTopicsRequestTopic{{TopicName: topic}}
	resp, err := cl.Request(ctx, req)
	if err != nil {
		return fmt.Errorf("StartMirrorTopics: %w", err)
	}
	r := resp.(*mirrorproto.StartMirrorTopicsResponse)
	if err := mirrorproto.ErrorFor(r.ErrorCode, r.ErrorMessage); err != nil {
		return fmt.Errorf("starting %s in mirror %s: %w", topic, mirror, err)
	}
	for _, t := range r.Topics {
		if err := mirrorproto.ErrorFor(t.ErrorCode, t.ErrorMessage); err != nil {
			return fmt.Errorf("starting %s in mirror %s: %w", t.Name, mirror, err)
		}
	}
	return nil
}

// stopTopic fails topic over (StopMirrorTopics by name).
func stopTopic(ctx context.Context, cl *kgo.Client, mirror, topic string) error {
	req := mirrorproto.NewStopMirrorTopicsRequest()
	req.MirrorName = mirror
	req.Topics = []mirrorproto.TopicName{{TopicName: topic}}
	resp, err := cl.Request(ctx, req)
	if err != nil {
		return fmt.Errorf("StopMirrorTopics: %w", err)
	}
	r := resp.(*mirrorproto.StopMirrorTopicsResponse)
	if err := mirrorproto.ErrorFor(r.ErrorCode, r.ErrorMessage); err != nil {
		return fmt.Errorf("stopping %s in mirror %s: %w", topic, mirror, err)
	}
	for _, t := range r.Topics {
		if err := mirrorproto.ErrorFor(t.ErrorCode, t.ErrorMessage); err != nil {
			return fmt.Errorf("stopping %s in mirror %s: %w", t.Name, mirror, err)
		}
	}
	return nil
}

// partitions describes topic's partitions in mirror.
func partitions(ctx context.Context, cl *kgo.Client, mirror, topic string) ([]mirrorproto.DescribeClusterMirrorsResponsePartition, error) {
	resp, err := cl.Request(ctx, &mirrorproto.DescribeClusterMirrorsRequest{MirrorNames: []string{mirror}})
	if err != nil {
		return nil, fmt.Errorf("DescribeClusterMirrors: %w", err)
	}
	r := resp.(*mirrorproto.DescribeClusterMirrorsResponse)
	if err := mirrorproto.ErrorFor(r.ErrorCode, r.ErrorMessage); err != nil {
		return nil, err
	}
	for _, m := range r.Mirrors {
		if err := mirrorproto.ErrorFor(m.ErrorCode, m.ErrorMessage); err != nil {
			return nil, fmt.Errorf("mirror %s: %w", mirror, err)
		}
		for _, t := range m.Topics {
			if t.TopicName == topic {
				return t.Partitions, nil
			}
		}
	}
	return nil, nil
}

// waitMirroring waits (at most a minute) until topic's n partitions are MIRRORING.
func waitMirroring(ctx context.Context, cl *kgo.Client, mirror, topic string, n int) error {
	deadline := time.Now().Add(time.Minute)
	for {
		ps, err := partitions(ctx, cl, mirror, topic)
		if err != nil {
			return err
		}
		ok := len(ps) == n
		for _, p := range ps {
			ok = ok && p.State == mirrorproto.StateMirroring
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%s did not reach MIRRORING in mirror %s within a minute: %v", topic, mirror, ps)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// mirrorLag is topic's lag in records summed over its partitions (unknown ones as 0).
func mirrorLag(ctx context.Context, cl *kgo.Client, mirror, topic string) (int64, error) {
	ps, err := partitions(ctx, cl, mirror, topic)
	if err != nil {
		return 0, err
	}
	var lag int64
	for _, p := range ps {
		lag += max(0, p.Lag)
	}
	return lag, nil
}
