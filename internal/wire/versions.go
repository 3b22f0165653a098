package wire

import (
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// VersionRange is the inclusive range of versions served for one API key.
type VersionRange struct{ Min, Max int16 }

// Versions is a listener's version table: the APIs served and their version ranges,
// answered to ApiVersions and checked for every request. internal/broker builds the
// tables of its listeners from its API registry (internal/broker/apis.go), where each
// API registers its range.
type Versions struct {
	ranges map[int16]VersionRange
}

// NewVersions returns a table serving exactly ranges.
func NewVersions(ranges map[int16]VersionRange) *Versions {
	v := &Versions{ranges: map[int16]VersionRange{}}
	for k, r := range ranges {
		v.ranges[k] = r
	}
	return v
}

// Lookup returns the range for key.
func (v *Versions) Lookup(key int16) (VersionRange, bool) {
	r, ok := v.ranges[key]
	return r, ok
}

// Supported reports whether key is served at version.
func (v *Versions) Supported(key, version int16) bool {
	r, ok := v.ranges[key]
	return ok && version >= r.Min && version <= r.Max
}

// APIKeys returns the table in ApiVersions response form, sorted by key.
func (v *Versions) APIKeys() []kmsg.ApiVersionsResponseApiKey {
	out := make([]kmsg.ApiVersionsResponseApiKey, 0, len(v.ranges))
	for k, r := range v.ranges {
		out = append(out, kmsg.ApiVersionsResponseApiKey{ApiKey: k, MinVersion: r.Min, MaxVersion: r.Max})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ApiKey < out[j].ApiKey })
	return out
}
