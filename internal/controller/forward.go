package controller

// Forwarded metadata writes: a broker that is not the active controller sends the record
// batch it would apply (admin requests, the mirror manager's records) to the active
// controller, which applies it to the quorum after checking it against its own image —
// the records are checked again when applied, so a batch built from an older image
// changes nothing it should not (docs/cluster.md, "Forwarded writes").

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/metadata"
	"github.com/kmirror/kmirror/internal/mirrorproto"
)

// ApplyRecordsKey is the API key of kmirror's inter-broker ApplyRecords RPC, served on
// the controller listener only (kmirror's own range, above the mirror RPCs' 1094–1106).
const ApplyRecordsKey int16 = 1200

// ApplyRecordsRequest carries one encoded metadata record batch (metadata.EncodeBatch)
// to the active controller. Flexible, version 0.
type ApplyRecordsRequest struct {
	Version int16
	Batch   []byte
}

// ApplyRecordsResponse answers ApplyRecords: ErrorCode 0 and Offset, the metadata offset
// of the applied batch (the broker waits until its own image reaches it), or the error:
// NOT_CONTROLLER and the codes of applyErrorCodes, with ErrorMessage.
type ApplyRecordsResponse struct {
	Version      int16
	ErrorCode    int16
	ErrorMessage *string
	Offset       int64
}

func (*ApplyRecordsRequest) Key() int16           { return ApplyRecordsKey }
func (*ApplyRecordsRequest) MaxVersion() int16    { return 0 }
func (v *ApplyRecordsRequest) SetVersion(x int16) { v.Version = x }
func (v *ApplyRecordsRequest) GetVersion() int16  { return v.Version }
func (*ApplyRecordsRequest) IsFlexible() bool     { return true }
func (v *ApplyRecordsRequest) ResponseKind() kmsg.Response {
	return &ApplyRecordsResponse{Version: v.Version}
}

func (v *ApplyRecordsRequest) AppendTo(dst []byte) []byte {
	dst = kbin.AppendCompactBytes(dst, v.Batch)
	return kbin.AppendUvarint(dst, 0)
}

func (v *ApplyRecordsRequest) ReadFrom(src []byte) error {
	r := kbin.Reader{Src: src}
	v.Batch = r.CompactBytes()
	kmsg.SkipTags(&r)
	return r.Complete()
}

func (*ApplyRecordsResponse) Key() int16           { return ApplyRecordsKey }
func (*ApplyRecordsResponse) MaxVersion() int16    { return 0 }
func (v *ApplyRecordsResponse) SetVersion(x int16) { v.Version = x }
func (v *ApplyRecordsResponse) GetVersion() int16  { return v.Version }
func (*ApplyRecordsResponse) IsFlexible() bool     { return true }
func (v *ApplyRecordsResponse) RequestKind() kmsg.Request {
	return &ApplyRecordsRequest{Version: v.Version}
}

// GetErrorCode is the response's error code (for the controller channel's retries).
func (v *ApplyRecordsResponse) GetErrorCode() int16 { return v.ErrorCode }

func (v *ApplyRecordsResponse) AppendTo(dst []byte) []byte {
	dst = kbin.AppendInt16(dst, v.ErrorCode)
	dst = kbin.AppendCompactNullableString(dst, v.ErrorMessage)
	dst = kbin.AppendInt64(dst, v.Offset)
	return kbin.AppendUvarint(dst, 0)
}

func (v *ApplyRecordsResponse) ReadFrom(src []byte) error {
	r := kbin.Reader{Src: src}
	v.ErrorCode = r.Int16()
	v.ErrorMessage = r.CompactNullableString()
	v.Offset = r.Int64()
	kmsg.SkipTags(&r)
	return r.Complete()
}

// applyErrorCodes maps the errors of metadata.Controller.Apply to the codes ApplyRecords
// answers, and back: a forwarded write fails with the error a local one would.
var applyErrorCodes = []struct {
	err  error
	code int16
}{
	{metadata.ErrNotController, kerr.NotController.Code},
	{metadata.ErrTopicExists, kerr.TopicAlreadyExists.Code},
	{metadata.ErrUnknownTopic, kerr.UnknownTopicOrPartition.Code},
	{metadata.ErrInvalidPartitions, kerr.InvalidPartitions.Code},
	{metadata.ErrUnknownBroker, kerr.StaleBrokerEpoch.Code},
	{metadata.ErrStalePlacement, kerr.InvalidReplicaAssignment.Code},
	{metadata.ErrInvalidRecord, kerr.InvalidRequest.Code},
	{metadata.ErrUnknownMirror, mirrorproto.UnknownClusterMirror},
	{metadata.ErrMirrorExists, mirrorproto.ClusterMirrorAlreadyExists},
	{context.DeadlineExceeded, kerr.RequestTimedOut.Code},
}

// ApplyRecords applies a forwarded batch on the active controller; an empty batch writes
// nothing and answers the offset of the active controller's image (metadata.Controller.
// CatchUp). Errors in the response: NOT_CONTROLLER, INVALID_REQUEST (an undecodable batch) and the codes of the
// metadata errors.
func (c *Controller) ApplyRecords(ctx context.Context, req *ApplyRecordsRequest) *ApplyRecordsResponse {
	resp := req.ResponseKind().(*ApplyRecordsResponse)
	resp.Offset = -1
	if c.notActive() {
		resp.ErrorCode = kerr.NotController.Code
		return resp
	}
	recs, err := metadata.DecodeBatch(req.Batch)
	if err == nil {
		var im *metadata.Image
		if im, err = c.q.Apply(ctx, recs...); err == nil {
			resp.Offset = int64(im.Offset)
			return resp
		}
	} else {
		err = fmt.Errorf("%w: %w", metadata.ErrInvalidRecord, err)
	}
	resp.ErrorCode = kerr.UnknownServerError.Code
	for _, e := range applyErrorCodes {
		if errors.Is(err, e.err) {
			resp.ErrorCode = e.code
			break
		}
	}
	msg := err.Error()
	resp.ErrorMessage = &msg
	return resp
}

// ApplyError turns an ApplyRecords answer back into the error metadata.Controller.Apply
// returns (errors.Is matches the same sentinel), nil for success.
func ApplyError(resp *ApplyRecordsResponse) error {
	if resp.ErrorCode == 0 {
		return nil
	}
	msg := ""
	if resp.ErrorMessage != nil {
		msg = *resp.ErrorMessage
	}
	for _, e := range applyErrorCodes {
		if e.code == resp.ErrorCode {
			return fmt.Errorf("%w (at the active controller: %s)", e.err, msg)
		}
	}
	return fmt.Errorf("the active controller refused the metadata write: %w: %s", kerr.ErrorForCode(resp.ErrorCode), msg)
}
