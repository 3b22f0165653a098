package broker

// DescribeUserScramCredentials and AlterUserScramCredentials (Kafka's
// KafkaApis.handleDescribeUserScramCredentialsRequest and ScramControlManager): the SCRAM
// credentials of the metadata log, so that `kafka-configs --entity-type users
// --alter --add-config 'SCRAM-SHA-256=[password=…]'` works. Only the mechanism and the
// iteration count are ever described.

import (
	"context"
	"errors"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/metadata"
	"github.com/kmirror/kmirror/internal/security"
)

func init() {
	register(kmsg.DescribeUserSCRAMCredentials, 0, 0, (*Broker).handleDescribeUserScramCredentials)
	register(kmsg.AlterUserSCRAMCredentials, 0, 0, (*Broker).handleAlterUserScramCredentials)
	register(kmsg.DescribeClientQuotas, 0, 1, (*Broker).handleDescribeClientQuotas)
}

func (b *Broker) handleDescribeUserScramCredentials(_ context.Context, req *kmsg.DescribeUserSCRAMCredentialsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	creds := b.meta.Image().ScramCredentials
	var users []string
	if req.Users == nil { // null: every user
		for u := range creds {
			users = append(users, u)
		}
		sort.Strings(users)
	} else {
		for _, u := range req.Users {
			users = append(users, u.Name)
		}
	}
	seen := map[string]int{}
	for _, u := range users {
		seen[u]++
	}
	for _, u := range users {
		r := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		r.User = u
		switch {
		case seen[u] > 1:
			r.ErrorCode, r.ErrorMessage = kerr.DuplicateResource.Code, strp("Cannot describe SCRAM credentials for the same user twice in a single request: "+u)
		case creds[u] == nil:
			r.ErrorCode, r.ErrorMessage = kerr.ResourceNotFound.Code, strp("Attempt to describe a user credential that does not exist: "+u)
		default:
			for _, code := range []int8{security.ScramCodeSHA256, security.ScramCodeSHA512} {
				if c := creds[u][code]; c != nil {
					ci := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
					ci.Mechanism, ci.Iterations = code, c.Iterations
					r.CredentialInfos = append(r.CredentialInfos, ci)
				}
			}
		}
		resp.Results = append(resp.Results, r)
	}
	return resp
}

// handleAlterUserScramCredentials validates every alteration as ScramControlManager does
// and writes the records of the users whose alterations are all valid, in one batch.
func (b *Broker) handleAlterUserScramCredentials(ctx context.Context, req *kmsg.AlterUserSCRAMCredentialsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	type result struct {
		code int16
		msg  string
		recs []metadata.Record
	}
	var order []string
	results := map[string]*result{}
	get := func(u string) *result {
		if r := results[u]; r != nil {
			return r
		}
		order = append(order, u)
		results[u] = &result{}
		return results[u]
	}
	fail := func(r *result, err *kerr.Error, msg string) {
		if r.code == 0 {
			r.code, r.msg = err.Code, msg
		}
	}
	type key struct {
		user string
		mech int8
	}
	altered := map[key]int{}
	for _, d := range req.Deletions {
		altered[key{d.Name, d.Mechanism}]++
	}
	for _, u := range req.Upsertions {
		altered[key{u.Name, u.Mechanism}]++
	}
	im := b.meta.Image()
	check := func(r *result, user string, mech int8) bool {
		switch {
		case user == "":
			fail(r, kerr.UnacceptableCredential, "Username must not be empty")
		case security.ScramMechanismName(mech) == "":
			fail(r, kerr.UnsupportedSaslMechanism, "Unknown SCRAM mechanism")
		case altered[key{user, mech}] > 1:
			fail(r, kerr.DuplicateResource, "A user credential cannot be altered twice in the same request")
		default:
			return true
		}
		return false
	}
	for _, d := range req.Deletions {
		r := get(d.Name)
		if !check(r, d.Name, d.Mechanism) {
			continue
		}
		if im.ScramCredentials[d.Name][d.Mechanism] == nil {
			fail(r, kerr.ResourceNotFound, "Attempt to delete a user credential that does not exist")
			continue
		}
		r.recs = append(r.recs, metadata.RemoveUserScramCredentialRecord{Name: d.Name, Mechanism: d.Mechanism})
	}
	for _, u := range req.Upsertions {
		r := get(u.Name)
		if !check(r, u.Name, u.Mechanism) {
			continue
		}
		switch {
		case u.Iterations < security.ScramMinIterations:
			fail(r, kerr.UnacceptableCredential, "Too few iterations")
			continue
		case u.Iterations > security.ScramMaxIterations:
			fail(r, kerr.UnacceptableCredential, "Too many iterations")
			continue
		}
		c, err := security.ScramFromSaltedPassword(security.ScramMechanismName(u.Mechanism), u.Salt, u.SaltedPassword, u.Iterations)
		if err != nil {
			fail(r, kerr.UnacceptableCredential, err.Error())
			continue
		}
		r.recs = append(r.recs, metadata.UserScramCredentialRecord{
			Name: u.Name, Mechanism: u.Mechanism, Salt: c.Salt, StoredKey: c.StoredKey, ServerKey: c.ServerKey, Iterations: c.Iterations,
		})
	}
	var recs []metadata.Record
	for _, u := range order {
		if r := results[u]; r.code == 0 {
			recs = append(recs, r.recs...)
		}
	}
	if len(recs) > 0 {
		if _, err := b.meta.Apply(ctx, recs...); err != nil {
			code := kerr.UnknownServerError
			if errors.Is(err, metadata.ErrNotController) {
				code = kerr.NotController
			}
			for _, u := range order {
				fail(results[u], code, err.Error())
			}
		}
	}
	for _, u := range order {
		r := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		r.User, r.ErrorCode = u, results[u].code
		if r.ErrorCode != 0 {
			r.ErrorMessage = strp(results[u].msg)
		}
		resp.Results = append(resp.Results, r)
	}
	return resp
}

// handleDescribeClientQuotas answers that no client quota is set: kmirror has no quotas,
// and kafka-configs --describe --entity-type users asks for them next to the SCRAM
// credentials (Kafka answers the same for a cluster without quotas).
func (b *Broker) handleDescribeClientQuotas(_ context.Context, req *kmsg.DescribeClientQuotasRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
	resp.Entries = []kmsg.DescribeClientQuotasResponseEntry{} // empty, not null: the Java client reads its size
	return resp
}
