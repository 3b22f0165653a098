package broker

// Authorization of the cluster mirroring RPCs (spec section 14, docs/authorization.md):
// the ClusterMirror resource, named by the mirror name, and CLUSTER_ACTION on the cluster
// for the inter-broker ones.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/acl"
	"github.com/kmirror/kmirror/internal/mirrorproto"
)

// authorizeMirrorRPC checks req before the mirror manager serves it. It returns the
// refusal to answer instead (nil: serve), the request to serve (req, or a copy without
// the topics refused) and the results of the topics refused, to be added to the answer:
//
//   - CreateClusterMirror: CREATE on the mirror; DeleteClusterMirror: DELETE;
//   - Start, Stop, Pause, Resume and RecoverMirrorTopics: ALTER on the mirror, and
//     ALTER_CONFIGS on each named topic (TOPIC_AUTHORIZATION_FAILED for the others;
//     topics chosen by patterns need ALTER_CONFIGS on every topic, the LITERAL "*");
//   - List and DescribeClusterMirrors: DESCRIBE, filtered by filterMirrorAnswer;
//   - ReadMirrorStates and WriteMirrorStates: CLUSTER_ACTION on the cluster.
//
// A whole-request refusal is CLUSTER_MIRROR_AUTHORIZATION_FAILED with a message
// (CLUSTER_AUTHORIZATION_FAILED for the inter-broker RPCs).
func (b *Broker) authorizeMirrorRPC(ctx context.Context, req kmsg.Request) (kmsg.Response, kmsg.Request, []mirrorproto.TopicResult) {
	if b.authorization.authz == nil {
		return nil, req, nil
	}
	mirrorOp := func(op acl.Operation, name string) kmsg.Response {
		if b.authorize(ctx, op, acl.ResourceClusterMirror, name) {
			return nil
		}
		resp := refuse(req.ResponseKind(), &kerr.Error{Code: mirrorproto.ClusterMirrorAuthorizationFailed})
		msg := "CLUSTER_MIRROR_AUTHORIZATION_FAILED: " + op.String() + " on cluster mirror " + name + " is not authorized"
		setErrorMessage(resp, msg)
		return resp
	}
	// topics splits names into those with ALTER_CONFIGS and the results of the others.
	topics := func(names []string, patterns bool) (keep []bool, denied []mirrorproto.TopicResult, refused bool) {
		if patterns && !b.authorize(ctx, acl.OpAlterConfigs, acl.ResourceTopic, acl.Wildcard) {
			return nil, nil, true
		}
		keep = make([]bool, len(names))
		for i, n := range names {
			if keep[i] = b.authorize(ctx, acl.OpAlterConfigs, acl.ResourceTopic, n); !keep[i] {
				denied = append(denied, mirrorproto.TopicResult{Name: n, ErrorCode: kerr.TopicAuthorizationFailed.Code,
					ErrorMessage: strp("TOPIC_AUTHORIZATION_FAILED: ALTER_CONFIGS on topic " + n + " is not authorized")})
			}
		}
		return keep, denied, false
	}
	patternRefusal := func() kmsg.Response {
		resp := refuse(req.ResponseKind(), kerr.TopicAuthorizationFailed)
		setErrorMessage(resp, "TOPIC_AUTHORIZATION_FAILED: topic patterns need ALTER_CONFIGS on every topic (the LITERAL *)")
		return resp
	}
	switch r := req.(type) {
	case *mirrorproto.CreateClusterMirrorRequest:
		return mirrorOp(acl.OpCreate, r.MirrorName), req, nil
	case *mirrorproto.DeleteClusterMirrorRequest:
		return mirrorOp(acl.OpDelete, r.MirrorName), req, nil
	case *mirrorproto.ListClusterMirrorsRequest, *mirrorproto.DescribeClusterMirrorsRequest:
		return nil, req, nil
	case *mirrorproto.ReadMirrorStatesRequest, *mirrorproto.WriteMirrorStatesRequest:
		if !b.authorizeCluster(ctx, acl.OpClusterAction) {
			return refuse(req.ResponseKind(), kerr.ClusterAuthorizationFailed), req, nil
		}
		return nil, req, nil
	case *mirrorproto.StartMirrorTopicsRequest:
		if resp := mirrorOp(acl.OpAlter, r.MirrorName); resp != nil {
			return resp, req, nil
		}
		names := make([]string, len(r.Topics))
		for i, t := range r.Topics {
			names[i] = t.TopicName
		}
		keep, denied, refused := topics(names, len(r.IncludePatterns) > 0)
		if refused {
			return patternRefusal(), req, nil
		}
		if len(denied) == 0 {
			return nil, req, nil
		}
		sub := *r
		sub.Topics = nil
		for i, t := range r.Topics {
			if keep[i] {
				sub.Topics = append(sub.Topics, t)
			}
		}
		return nil, &sub, denied
	case *mirrorproto.StopMirrorTopicsRequest:
		return b.authorizeMirrorTopics(r.MirrorName, r.Topics, len(r.Patterns) > 0, mirrorOp, topics, patternRefusal, req,
			func(ts []mirrorproto.TopicName) kmsg.Request { sub := *r; sub.Topics = ts; return &sub })
	case *mirrorproto.PauseMirrorTopicsRequest:
		return b.authorizeMirrorTopics(r.MirrorName, r.Topics, false, mirrorOp, topics, patternRefusal, req,
			func(ts []mirrorproto.TopicName) kmsg.Request { sub := *r; sub.Topics = ts; return &sub })
	case *mirrorproto.ResumeMirrorTopicsRequest:
		return b.authorizeMirrorTopics(r.MirrorName, r.Topics, false, mirrorOp, topics, patternRefusal, req,
			func(ts []mirrorproto.TopicName) kmsg.Request { sub := *r; sub.Topics = ts; return &sub })
	case *mirrorproto.RecoverMirrorTopicsRequest:
		if resp := mirrorOp(acl.OpAlter, r.MirrorName); resp != nil {
			return resp, req, nil
		}
		for _, t := range r.Topics {
			if !b.authorize(ctx, acl.OpAlterConfigs, acl.ResourceTopic, t.TopicName) {
				resp := refuse(req.ResponseKind(), kerr.TopicAuthorizationFailed)
				setErrorMessage(resp, "TOPIC_AUTHORIZATION_FAILED: ALTER_CONFIGS on topic "+t.TopicName+" is not authorized")
				return resp, req, nil
			}
		}
		return nil, req, nil
	}
	return nil, req, nil
}

// authorizeMirrorTopics is authorizeMirrorRPC for the requests naming topics as
// []TopicName (Stop, Pause, Resume); with rebuilds the request with the kept topics.
func (b *Broker) authorizeMirrorTopics(mirror string, ts []mirrorproto.TopicName, patterns bool,
	mirrorOp func(acl.Operation, string) kmsg.Response,
	topics func([]string, bool) ([]bool, []mirrorproto.TopicResult, bool),
	patternRefusal func() kmsg.Response, req kmsg.Request,
	with func([]mirrorproto.TopicName) kmsg.Request) (kmsg.Response, kmsg.Request, []mirrorproto.TopicResult) {
	if resp := mirrorOp(acl.OpAlter, mirror); resp != nil {
		return resp, req, nil
	}
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = t.TopicName
	}
	keep, denied, refused := topics(names, patterns)
	if refused {
		return patternRefusal(), req, nil
	}
	if len(denied) == 0 {
		return nil, req, nil
	}
	var kept []mirrorproto.TopicName
	for i, t := range ts {
		if keep[i] {
			kept = append(kept, t)
		}
	}
	return nil, with(kept), denied
}

// filterMirrorAnswer removes from a List or DescribeClusterMirrors answer the mirrors
// without DESCRIBE (a DescribeClusterMirrors that named one gets it back as
// CLUSTER_MIRROR_AUTHORIZATION_FAILED), and adds the refused topics' results to the
// answers that have them.
func (b *Broker) filterMirrorAnswer(ctx context.Context, req kmsg.Request, resp kmsg.Response, denied []mirrorproto.TopicResult) {
	if b.authorization.authz == nil || resp == nil {
		return
	}
	describe := func(name string) bool { return b.authorize(ctx, acl.OpDescribe, acl.ResourceClusterMirror, name) }
	switch r := resp.(type) {
	case *mirrorproto.ListClusterMirrorsResponse:
		kept := r.Mirrors[:0]
		for _, m := range r.Mirrors {
			if describe(m.MirrorName) {
				kept = append(kept, m)
			}
		}
		r.Mirrors = kept
	case *mirrorproto.DescribeClusterMirrorsResponse:
		named := len(req.(*mirrorproto.DescribeClusterMirrorsRequest).MirrorNames) > 0
		kept := r.Mirrors[:0]
		for _, m := range r.Mirrors {
			switch {
			case describe(m.MirrorName):
				kept = append(kept, m)
			case named:
				kept = append(kept, mirrorproto.DescribeClusterMirrorsResponseMirror{MirrorName: m.MirrorName, ErrorCode: mirrorproto.ClusterMirrorAuthorizationFailed,
					ErrorMessage: strp("CLUSTER_MIRROR_AUTHORIZATION_FAILED: DESCRIBE on cluster mirror " + m.MirrorName + " is not authorized")})
			}
		}
		r.Mirrors = kept
	case *mirrorproto.StartMirrorTopicsResponse:
		r.Topics = append(r.Topics, denied...)
	case *mirrorproto.StopMirrorTopicsResponse:
		r.Topics = append(r.Topics, denied...)
	case *mirrorproto.PauseMirrorTopicsResponse:
		r.Topics = append(r.Topics, denied...)
	case *mirrorproto.ResumeMirrorTopicsResponse:
		r.Topics = append(r.Topics, denied...)
	}
}
