package mirrorscli

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kmirror/kmirror/internal/mirrorproto"
)

// ListEntry is one --list --json object; the fields are the table's columns
// in snake_case, plus topic_names.
type ListEntry struct {
	Mirror                string   `json:"mirror"`
	Topics                int32    `json:"topics"`
	SourceClusterID       *string  `json:"source_cluster_id"`
	SourceBootstrapServer string   `json:"source_bootstrap_server"`
	TopicNames            []string `json:"topic_names"`
}

// DescribeEntry is one --describe --json object: the table's columns in
// snake_case (null where the table prints `-`), plus the partition's retry
// attempt, last error, last mirror position, failback truncation report
// (truncated_to null when none; spec section 15) and skipped offsets (spec
// section 16).
type DescribeEntry struct {
	Mirror            string  `json:"mirror"`
	Topic             string  `json:"topic"`
	Partition         int32   `json:"partition"`
	SourceOffset      *int64  `json:"source_offset"`
	DestinationOffset *int64  `json:"destination_offset"`
	Lag               *int64  `json:"lag"`
	State             string  `json:"state"`
	RetryAttempt      int32   `json:"retry_attempt"`
	Error             *string `json:"error"`
	LastMirrorEpoch   *int32  `json:"last_mirror_epoch"`
	LastMirrorOffset  *int64  `json:"last_mirror_offset"`
	TruncatedTo       *int64  `json:"truncated_to"`
	TruncatedRecords  int64   `json:"truncated_records"`
	SkippedOffsets    int64   `json:"skipped_offsets"`
}

// FailedEntry is one --describe --failed --json object: the table's columns
// in snake_case (retry as printed, e.g. "3/20" or "NonRetryable"), plus
// retry_attempt (-1 = non-retryable) and max_retry_attempts.
type FailedEntry struct {
	Mirror           string  `json:"mirror"`
	Topic            string  `json:"topic"`
	Partition        int32   `json:"partition"`
	Retry            string  `json:"retry"`
	Error            *string `json:"error"`
	RetryAttempt     int32   `json:"retry_attempt"`
	MaxRetryAttempts int32   `json:"max_retry_attempts"`
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func dash(v int64) string {
	if v < 0 {
		return "-"
	}
	return fmt.Sprint(v)
}

func known64(v int64) *int64 {
	if v < 0 {
		return nil
	}
	return &v
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func printList(w io.Writer, mirrors []mirrorproto.ListClusterMirrorsResponseMirror, asJSON bool) error {
	sort.Slice(mirrors, func(i, j int) bool { return mirrors[i].MirrorName < mirrors[j].MirrorName })
	if asJSON {
		out := make([]ListEntry, 0, len(mirrors))
		for _, m := range mirrors {
			e := ListEntry{Mirror: m.MirrorName, Topics: m.TopicCount, SourceBootstrapServer: m.SourceBootstrap, TopicNames: m.TopicNames}
			if m.SourceClusterID != "" {
				id := m.SourceClusterID
				e.SourceClusterID = &id
			}
			if e.TopicNames == nil {
				e.TopicNames = []string{}
			}
			out = append(out, e)
		}
		return writeJSON(w, out)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "MIRROR\tTOPICS\tSOURCE-CLUSTER-ID\tSOURCE-BOOTSTRAP-SERVER")
	for _, m := range mirrors {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", m.MirrorName, m.TopicCount, orDash(m.SourceClusterID), orDash(m.SourceBootstrap))
	}
	return tw.Flush()
}

// row is one mirror partition with its mirror and topic names.
type row struct {
	mirror, topic string
	p             mirrorproto.DescribeClusterMirrorsResponsePartition
}

// rows flattens a DescribeClusterMirrors response, sorted by mirror, topic
// and partition.
func rows(dr *mirrorproto.DescribeClusterMirrorsResponse) []row {
	var out []row
	for _, m := range dr.Mirrors {
		for _, t := range m.Topics {
			for _, p := range t.Partitions {
				out = append(out, row{m.MirrorName, t.TopicName, p})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.mirror != b.mirror {
			return a.mirror < b.mirror
		}
		if a.topic != b.topic {
			return a.topic < b.topic
		}
		return a.p.PartitionIndex < b.p.PartitionIndex
	})
	return out
}

// hasTruncation reports whether a partition carries a failback truncation
// report that dropped records.
func hasTruncation(p *mirrorproto.DescribeClusterMirrorsResponsePartition) bool {
	return p.TruncatedOffset >= 0 && p.TruncatedRecords > 0
}

func printDescribe(w io.Writer, dr *mirrorproto.DescribeClusterMirrorsResponse, asJSON bool) error {
	rs := rows(dr)
	if asJSON {
		out := make([]DescribeEntry, 0, len(rs))
		for _, r := range rs {
			p := r.p
			e := DescribeEntry{
				Mirror: r.mirror, Topic: r.topic, Partition: p.PartitionIndex,
				SourceOffset: known64(p.SourceOffset), DestinationOffset: known64(p.DestinationOffset), Lag: known64(p.Lag),
				State: p.State.String(), RetryAttempt: p.RetryAttempt, Error: p.ErrorMessage,
				LastMirrorOffset: known64(p.LastMirrorOffset),
				TruncatedRecords: p.TruncatedRecords, SkippedOffsets: p.SkippedOffsets,
			}
			if p.LastMirrorEpoch >= 0 {
				ep := p.LastMirrorEpoch
				e.LastMirrorEpoch = &ep
			}
			if p.TruncatedOffset >= 0 {
				e.TruncatedTo = known64(p.TruncatedOffset)
			}
			out = append(out, e)
		}
		return writeJSON(w, out)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "MIRROR\tTOPIC\tPARTITION\tSOURCE-OFFSET\tDESTINATION-OFFSET\tLAG\tSTATE")
	for _, r := range rs {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\n", r.mirror, r.topic, r.p.PartitionIndex,
			dash(r.p.SourceOffset), dash(r.p.DestinationOffset), dash(r.p.Lag), r.p.State)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var truncated, skipped []row
	for _, r := range rs {
		if hasTruncation(&r.p) {
			truncated = append(truncated, r)
		}
		if r.p.SkippedOffsets > 0 {
			skipped = append(skipped, r)
		}
	}
	if len(truncated) > 0 {
		fmt.Fprintln(w, "\nFailback truncations:")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "MIRROR\tTOPIC\tPARTITION\tTRUNCATED-TO\tTRUNCATED-RECORDS")
		for _, r := range truncated {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\n", r.mirror, r.topic, r.p.PartitionIndex, r.p.TruncatedOffset, r.p.TruncatedRecords)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(skipped) > 0 {
		fmt.Fprintln(w, "\nSkipped offsets (the source log start passed the mirror position):")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "MIRROR\tTOPIC\tPARTITION\tSKIPPED-OFFSETS")
		for _, r := range skipped {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\n", r.mirror, r.topic, r.p.PartitionIndex, r.p.SkippedOffsets)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return printSyncTasks(w, dr)
}

// printSyncTasks prints the "Sync tasks:" section of --describe: per mirror and metadata
// sync task (spec section 9) the time of the last success, the number of failed runs and
// the time and message of the last failure. Every line has fewer than the partition
// table's 7 whitespace-separated fields (scripts parse that table by field count): the
// message is the last column, its spaces printed as no-break spaces (U+00A0).
func printSyncTasks(w io.Writer, dr *mirrorproto.DescribeClusterMirrorsResponse) error {
	ms := make([]mirrorproto.DescribeClusterMirrorsResponseMirror, 0, len(dr.Mirrors))
	for _, m := range dr.Mirrors {
		if len(m.SyncTasks) > 0 {
			ms = append(ms, m)
		}
	}
	if len(ms) == 0 {
		return nil
	}
	sort.SliceStable(ms, func(i, j int) bool { return ms[i].MirrorName < ms[j].MirrorName })
	fmt.Fprintln(w, "\nSync tasks:")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "MIRROR\tTASK\tLAST-SUCCESS\tERRORS\tLAST-ERROR-AT\tLAST-ERROR")
	for _, m := range ms {
		for _, t := range m.SyncTasks {
			msg := "-"
			if t.LastError != nil && *t.LastError != "" {
				msg = strings.Join(strings.Fields(*t.LastError), "\u00a0")
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", m.MirrorName, t.Task, msTime(t.LastSuccessMs), t.ErrorCount, msTime(t.LastErrorMs), msg)
		}
	}
	return tw.Flush()
}

// msTime renders Unix ms as UTC RFC 3339 seconds, "-" when negative (none).
func msTime(v int64) string {
	if v < 0 {
		return "-"
	}
	return time.UnixMilli(v).UTC().Format(time.RFC3339)
}

// retryText renders RETRY: "NonRetryable" for attempt -1, else "n/max".
func retryText(attempt, max int32) string {
	if attempt == mirrorproto.RetryAttemptNonRetryable {
		return "NonRetryable"
	}
	return fmt.Sprintf("%d/%d", attempt, max)
}

func printFailed(w io.Writer, dr *mirrorproto.DescribeClusterMirrorsResponse, asJSON bool) error {
	max := dr.MaxRetryAttempts
	if max <= 0 {
		max = mirrorproto.DefaultMaxRetryAttempts
	}
	var failed []row
	for _, r := range rows(dr) {
		if r.p.State == mirrorproto.StateFailed {
			failed = append(failed, r)
		}
	}
	if asJSON {
		out := make([]FailedEntry, 0, len(failed))
		for _, r := range failed {
			out = append(out, FailedEntry{Mirror: r.mirror, Topic: r.topic, Partition: r.p.PartitionIndex,
				Retry: retryText(r.p.RetryAttempt, max), Error: r.p.ErrorMessage, RetryAttempt: r.p.RetryAttempt, MaxRetryAttempts: max})
		}
		return writeJSON(w, out)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "MIRROR\tTOPIC\tPARTITION\tRETRY\tERROR")
	for _, r := range failed {
		msg := "-"
		if r.p.ErrorMessage != nil && *r.p.ErrorMessage != "" {
			msg = *r.p.ErrorMessage
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", r.mirror, r.topic, r.p.PartitionIndex, retryText(r.p.RetryAttempt, max), msg)
	}
	return tw.Flush()
}
